// Routing counts into the expert plane's heat (see route_heat.hpp).
#include "libaff/ui/route_heat.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace aff::ui {

RouteHeat::RouteHeat(StatsBoard& board, const ExpertPlane& plane, RouteObserver* next, double half_life_s)
    : board_(board), layers_(std::max(plane.layers, 0)), experts_(std::max(plane.experts, 0)), next_(next),
      half_life_s_(half_life_s), counts_(std::size_t(layers_) * std::size_t(experts_), 0.0),
      last_decay_(Clock::now()), last_publish_(Clock::time_point{}) {
    source_ = "heat: tokens routed, half-life " + std::to_string(int(half_life_s_)) + " s";
}

void RouteHeat::on_route(const RouteEvent& event) {
    if (event.layer >= 0 && event.layer < layers_)
        for (int e : event.experts)
            if (e >= 0 && e < experts_) counts_[std::size_t(event.layer) * std::size_t(experts_) + std::size_t(e)] += 1;
    if (next_) next_->on_route(event);
}

void RouteHeat::on_forward_end() {
    if (next_) next_->on_forward_end();
    if (Clock::now() - last_publish_ >= std::chrono::milliseconds(200)) publish();
}

void RouteHeat::publish() {
    const Clock::time_point now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last_decay_).count();
    last_decay_ = now;
    last_publish_ = now;
    const double keep = half_life_s_ > 0 ? std::exp2(-dt / half_life_s_) : 1.0;
    double top = 0;
    for (double& c : counts_) {
        c *= keep;
        top = std::max(top, c);
    }
    std::vector<float> heat(counts_.size());
    for (std::size_t i = 0; i < counts_.size(); ++i) heat[i] = top > 0 ? float(counts_[i] / top) : 0.0f;
    board_.publish_plane_heat(std::move(heat), source_);  // the tiers are TierFeed's
}

bool install_route_heat(const std::function<void(RouteObserver*)>& set, RouteHeat& heat) {
    try {
        set(&heat);
        return true;
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::unsupported) throw;
        return false;
    }
}

}  // namespace aff::ui
