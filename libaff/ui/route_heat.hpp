// The expert plane's heat from the router itself: a RouteObserver (model/route_observer.hpp,
// the hook route traces use) that counts, per layer and expert, the tokens routed there,
// halves the counts every half_life_s so the plane shows recent routing, and publishes the
// plane's heat to the board at most 5 times a second, from the forward's own thread (a copy
// of layers x experts floats; nothing is drawn there; the plane's tiers are left as they are). It passes every event on to `next`
// (the route-trace recorder, when one is installed), so both can watch one forward.
// Backends without the hook (the server's scripted test engine) keep the placeholder heat.
#pragma once

#include "libaff/model/route_observer.hpp"
#include "libaff/ui/stats.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace aff::ui {

class RouteHeat final : public RouteObserver {
public:
    // `plane` gives the shape (resident_expert_plane; the board's plane must have it too).
    RouteHeat(StatsBoard& board, const ExpertPlane& plane, RouteObserver* next = nullptr, double half_life_s = 10.0);

    void on_route(const RouteEvent& event) override;
    void on_forward_end() override;
    // Publishes now (the end of a run), whatever the time since the last.
    void publish();

    // The counts behind the heat, [layers * experts] (tests).
    const std::vector<double>& counts() const { return counts_; }

private:
    using Clock = std::chrono::steady_clock;
    StatsBoard& board_;
    int layers_, experts_;
    std::string source_;
    RouteObserver* next_;
    double half_life_s_;
    std::vector<double> counts_;
    Clock::time_point last_decay_, last_publish_;
};

// Installs `heat` through `set` (a backend's or the server engine's set_route_observer).
// Returns false, leaving the placeholder heat, where the backend has no route hook.
bool install_route_heat(const std::function<void(RouteObserver*)>& set, RouteHeat& heat);

}  // namespace aff::ui
