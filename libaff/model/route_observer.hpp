// The narrow hook through which route traces (libaff/trace/recorder.hpp) see the router's
// choices: forward() calls on_route once per main layer, after the router has chosen and
// before the experts run, with every token's K expert ids and gate weights as computed,
// then on_forward_end once the call's layers are done. The observer only reads: what the
// forward computes does not depend on whether one is installed (forward_test checks the
// logits bit for bit).
#pragma once

#include <cstdint>
#include <span>

namespace aff {

struct RouteEvent {
    int layer = 0;
    std::int64_t start = 0;                // position of the first token
    std::span<const std::int32_t> tokens;  // [n]
    int top_k = 0;
    std::span<const int> experts;          // [n, K], the router's order
    std::span<const float> weights;        // [n, K], the gate each expert's output is multiplied by
};

class RouteObserver {
public:
    virtual ~RouteObserver() = default;
    virtual void on_route(const RouteEvent& event) = 0;
    virtual void on_forward_end() = 0;
};

}  // namespace aff
