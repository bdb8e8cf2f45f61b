// What the route-observer device tests (mtp_routes_test.cpp, dspark_routes_test.cpp) record:
// every event an observer saw, in order, with copies of its ids and weights, to compare a
// GPU run's events with the CPU reference's.
#pragma once

#include "libaff/model/route_observer.hpp"

#include <cstdint>
#include <vector>

namespace aff::gpu::test {

// A route event, or an end (layer -1).
struct Event {
    int layer = -1;
    std::int64_t start = 0;
    std::vector<std::int32_t> tokens;
    std::vector<int> ids;
    std::vector<float> weights;
};

struct EventLog final : aff::RouteObserver {
    std::vector<Event> events;
    void on_route(const aff::RouteEvent& e) override {
        events.push_back({e.layer, e.start, {e.tokens.begin(), e.tokens.end()}, {e.experts.begin(), e.experts.end()},
                          {e.weights.begin(), e.weights.end()}});
    }
    void on_forward_end() override { events.push_back({}); }
    std::vector<Event> of_layer(int layer) const {
        std::vector<Event> v;
        for (const Event& e : events)
            if (e.layer == layer) v.push_back(e);
        return v;
    }
};

}  // namespace aff::gpu::test
