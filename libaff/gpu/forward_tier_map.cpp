// GpuModel::expert_tier_map (forward.hpp): the tier of every routed expert, read from the
// expert table the kernels use (the address each entry points at: in the GPU slab or in the
// pinned host pool), so the live view's expert plane shows where the bytes really are.
#include "libaff/gpu/forward_impl.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

std::vector<placement::Tier> GpuModel::expert_tier_map() const {
    const Impl& m = *shards_.front();  // tiers exist on one GPU only
    if (!m.tiers) return {};
    const ExpertTiers& t = *m.tiers;
    const auto* slab = t.slab.as<const std::uint8_t>();
    const auto* pool = static_cast<const std::uint8_t*>(t.pool.device_data());
    // The trunk's rows only: the MTP layer's (after them, when it is on the GPU) is never tiered.
    const std::size_t trunk = std::min(m.table_host.size(), std::size_t(m.c.num_layers) * m.c.n_routed_experts);
    std::vector<placement::Tier> where(trunk, placement::Tier::ssd);
    for (std::size_t i = 0; i < trunk; ++i) {
        const std::uint8_t* a = m.table_host[i];
        if (slab && a >= slab && a < slab + t.slab.size()) where[i] = placement::Tier::gpu;
        else if (pool && a >= pool && a < pool + t.pool.size()) where[i] = placement::Tier::host;
        else if (i < t.book->tiers().size()) where[i] = t.book->tier(placement::ExpertKey(i));  // in neither: where the book says (an SSD tier)
    }
    return where;
}

}  // namespace aff::gpu
