// Where the expert plane's figures come from until the engine publishes its own: the
// plane's shape, every expert in the one tier a backend that does not tier keeps them in
// (the CPU reference in host memory, the GPU forward in its weight arena), and placeholder
// heat, marked as such on the plane. A tiered GPU forward's real tiers replace the map
// (TierFeed, tier_feed.hpp, from Sequence::expert_tiers); the heat comes from RouteHeat
// (route_heat.hpp) where the forward has a route hook (the CPU forward's, and the GPU
// model's route ring).
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/ui/stats.hpp"

namespace aff::ui {

ExpertPlane resident_expert_plane(const ModelConfig& config, bool on_gpu);

}  // namespace aff::ui
