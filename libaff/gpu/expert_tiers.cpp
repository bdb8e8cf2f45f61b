// The expert tiers (expert_tiers.hpp): the plan, the allocations, the initial placement and
// the first fill.
#include "libaff/gpu/expert_tiers.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff::gpu::fwd {

void ExpertTiers::setup(const ModelConfig& c, const GpuTierOptions& options, const placement::TierInputs& in,
                        const std::vector<bool>& hash) {
    layers = c.num_layers;
    experts = c.n_routed_experts;
    top_k = c.experts_per_token;
    slot_bytes = in.slot_bytes;
    inputs = in;
    plan = placement::plan_tiers(in);
    const std::uint32_t gpu_slots = static_cast<std::uint32_t>(plan.gpu_slots);
    const std::uint32_t host_slots = static_cast<std::uint32_t>(plan.host_slots);
    if (gpu_slots > 0) slab = Buffer(std::size_t(gpu_slots) * slot_bytes);
    if (host_slots > 0) pool = PinnedBuffer(std::size_t(host_slots) * slot_bytes);
    staging = Buffer(slot_bytes);
    table_upload = PinnedBuffer(std::size_t(layers) * experts * sizeof(const std::uint8_t*));

    placement::Geometry g;
    g.layers = static_cast<std::uint32_t>(layers);
    g.experts = static_cast<std::uint32_t>(experts);
    g.expert_bytes = slot_bytes;
    g.hash_layers = hash;
    const std::vector<placement::ExpertKey> order = placement::profile_order(g, options.profile);
    const placement::Slots slots{gpu_slots, host_slots};
    book = std::make_unique<placement::TierBook>(g, slots, order);
    policy = std::make_unique<RecordingPolicy>(placement::make_policy(options.strategy, options.heat));
    if (policy->needs_future())
        throw_usage("--placement-strategy " + options.strategy + " needs the future (trace replay only: aff-trace replay)");
    engine = std::make_unique<placement::PlacementEngine>(g, slots, order, *policy);
}

ExpertTiers::~ExpertTiers() {
    try {
        copy_stream.synchronize();
    } catch (...) {  // a failing device: the buffers go with it
    }
}

void ExpertTiers::wait_for_moves(const Stream& stream) {
    if (!moves_queued) return;
    call_start.record(stream);  // the stall is how far moves_done lies past this (read at the next pass)
    stream.wait(moves_done);
    moves_queued = false;
    stall_open = true;
    ++waited_calls;
}

const std::uint8_t* ExpertTiers::address(int l, int e) const {
    const std::size_t k = std::size_t(l) * experts + e;
    const placement::Tier where = book->tier(placement::ExpertKey(k));
    const std::size_t at = std::size_t(book->slot(placement::ExpertKey(k))) * slot_bytes;
    if (where == placement::Tier::gpu) return slab.as<std::uint8_t>() + at;
    if (where == placement::Tier::ssd) return nullptr;
    return static_cast<const std::uint8_t*>(pool.device_data()) + at;
}

void ExpertTiers::fill(const std::function<void(int, int, std::uint8_t*)>& fill_extent, const Stream& stream) {
    // The slab through a host buffer of up to 64 MiB of extents at a time, one copy each.
    const std::size_t batch = std::max<std::size_t>(1, (64u << 20) / slot_bytes);
    std::vector<std::uint8_t> host;
    std::vector<std::pair<std::uint8_t*, std::size_t>> pending;  // slab place, staging offset
    auto flush = [&] {
        for (const auto& [dst, at] : pending) stream.copy(dst, host.data() + at, slot_bytes);
        stream.synchronize();
        pending.clear();
    };
    for (int l = 0; l < layers; ++l)
        for (int e = 0; e < experts; ++e) {
            const std::size_t k = std::size_t(l) * experts + e;
            const placement::Tier where = book->tier(placement::ExpertKey(k));
            const std::size_t place = std::size_t(book->slot(placement::ExpertKey(k))) * slot_bytes;
            if (where == placement::Tier::ssd) continue;  // read when routed to
            if (where == placement::Tier::host) {
                std::uint8_t* dst = static_cast<std::uint8_t*>(pool.data()) + place;
                std::fill(dst, dst + slot_bytes, std::uint8_t(0));
                fill_extent(l, e, dst);
                continue;
            }
            if (pending.size() == batch) flush();
            host.resize(batch * slot_bytes);
            const std::size_t at = pending.size() * slot_bytes;
            std::fill(host.begin() + static_cast<std::ptrdiff_t>(at),
                      host.begin() + static_cast<std::ptrdiff_t>(at + slot_bytes), std::uint8_t(0));
            fill_extent(l, e, host.data() + at);
            pending.emplace_back(slab.as<std::uint8_t>() + place, at);
        }
    flush();
}

}  // namespace aff::gpu::fwd
