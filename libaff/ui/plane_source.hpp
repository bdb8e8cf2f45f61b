// Where the expert plane's figures come from until the engine publishes its own. Tiers
// are real today: every backend keeps all routed experts in one place (the CPU reference
// in host memory, the GPU forward in device memory), so the plane is one colour. Heat is
// a placeholder, marked as such on the plane, until RouteHeat (route_heat.hpp) replaces it
// from the forward's route hook (the CPU forward's, and the GPU model's route ring); the
// tiered expert store will publish both.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/ui/stats.hpp"

namespace aff::ui {

ExpertPlane resident_expert_plane(const ModelConfig& config, bool on_gpu);

}  // namespace aff::ui
