// GpuModel's door to the expert table (forward.hpp, expert_extent and move_expert): where a
// codebook-stored expert's extent is now, and pointing its entry elsewhere. The kernels read
// the table when they run (kernels/moe_gemv.hpp, moe_gemm.hpp), so nothing is recaptured.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <cstdint>
#include <string>

namespace aff::gpu {

GpuModel::Impl& GpuModel::expert_owner(int layer, int expert, const char* what) const {
    const Impl& m = *shards_.front();
    if (!m.experts_codebook)
        throw_usage(std::string(what) + ": the routed experts are not codebook-stored (" +
                    (m.experts_why_dense.empty() ? std::string("dense") : m.experts_why_dense) + ")");
    if (layer < 0 || layer >= m.c.num_layers || expert < 0 || expert >= m.c.n_routed_experts)
        throw_usage(std::string(what) + ": expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                    " is outside the model's " + std::to_string(m.c.num_layers) + " layers of " +
                    std::to_string(m.c.n_routed_experts) + " experts");
    for (const auto& p : shards_)
        if (layer >= p->first_layer && layer < p->end_layer) return *p;
    throw_internal(std::string(what) + ": no part holds layer " + std::to_string(layer));
}

GpuExpertExtent GpuModel::expert_extent(int layer, int expert) const {
    const Impl& p = expert_owner(layer, expert, "expert_extent");
    return {p.table_host[std::size_t(layer) * p.c.n_routed_experts + expert], p.extent.bytes, p.device};
}

void GpuModel::move_expert(int layer, int expert, const void* address) {
    Impl& p = expert_owner(layer, expert, "move_expert");
    if (p.tiers) throw_usage("move_expert: the experts are tiered, and the mover places them (GpuOptions::tiers)");
    if (!address || reinterpret_cast<std::uintptr_t>(address) % 16 != 0)
        throw_usage("move_expert: the address must be 16-byte aligned and not null");
    use_device(p.device);
    p.set_address(p.c, p, layer, expert, address, p.stream);
    use_device(shards_.front()->device);
}

std::size_t GpuModel::graphs_captured() const {
    std::size_t n = 0;
    for (const auto& p : shards_) n += p->graphs.captures();
    return n;
}

}  // namespace aff::gpu
