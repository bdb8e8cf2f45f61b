// The expert plane of a backend that keeps every expert in one tier (see plane_source.hpp).
#include "libaff/ui/plane_source.hpp"

namespace aff::ui {

ExpertPlane resident_expert_plane(const ModelConfig& config, bool on_gpu) {
    ExpertPlane p;
    p.layers = config.num_layers;
    p.experts = config.n_routed_experts;
    p.tier.assign(std::size_t(p.layers) * std::size_t(p.experts), on_gpu ? Tier::gpu : Tier::host);
    p.tier_placeholder = false;
    p.heat_placeholder = true;
    p.heat_source = "heat: placeholder, routes not observed";
    return p;
}

}  // namespace aff::ui
