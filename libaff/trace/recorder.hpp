// Records a forward pass's routing into a route trace: a RouteObserver (model/
// route_observer.hpp) that gathers one step record per forward call (every main layer the
// call ran, each token's K experts and gate weights as the router produced them) and
// hands it to a RouteTraceWriter. The caller says before each call which sequence and
// phase its tokens belong to (the generation loop says what each call is: runtime/route_phase.hpp;
// aff-serve: a sequence per request). A call of the draft's layers (the MTP layer's events
// carry layer L, one past the main layers; DSpark's stages L, L + 1, L + 2) is recorded as a
// draft step, whatever phase was said. Copies ids and weights only: nothing the forward computes changes.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/model/route_observer.hpp"
#include "libaff/trace/route_trace_writer.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff::trace {

// The header for a model loaded from `model_path` (formats/route-trace.md §7): geometry
// from the config, identity and expert size from the container (its header_digest and
// expert extent size) or, for a checkpoint directory, the XXH3-64 of its config.json and
// no expert size.
TraceHeader trace_header_for(const ModelConfig& config, const std::string& model_path);

class RouteRecorder final : public RouteObserver {
public:
    RouteRecorder(std::string path, TraceHeader header, Compression compression = Compression::zstd);
    // Before a forward call: its tokens' sequence and phase (every later call's too, until
    // the next begin).
    void begin(std::uint32_t sequence, Phase phase);
    // Before a call over several sequences (GpuModel::decode of several states), which the
    // observer sees as one forward per sequence in the caller's order (on_forward_end after
    // each): the trace's sequence id of each, so each is recorded as its own step under its
    // own id. After the last, its id stays (as begin's one sequence does).
    void begin(std::span<const std::uint32_t> sequences, Phase phase);
    void on_route(const RouteEvent& event) override;
    void on_forward_end() override;
    // Writes the whole trace so far (it may be called again later).
    void publish() { writer_.publish(); }
    std::uint64_t steps() const { return writer_.steps(); }

private:
    RouteTraceWriter writer_;
    std::vector<std::uint32_t> sequences_{0};  // of the calls to come, in order
    std::size_t next_ = 0;                     // the one the next step is under
    Phase phase_ = Phase::prefill;
    TraceStep step_;
};

}  // namespace aff::trace
