// plan_tiers (tier_plan.hpp): the GPU first, then the host pool, the rest on the SSD.
#include "libaff/placement/tier_plan.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cstdio>

namespace aff::placement {

namespace {
std::string mib(std::uint64_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%llu MiB", static_cast<unsigned long long>((bytes + kMiB / 2) / kMiB));
    return b;
}
}  // namespace

std::uint64_t derived_headroom(std::uint64_t gpu_budget) { return std::max<std::uint64_t>(256 * kMiB, gpu_budget / 100 * 3); }

std::uint64_t plan_headroom(const std::optional<std::uint64_t>& given, std::uint64_t gpu_budget) {
    return given ? *given : derived_headroom(gpu_budget);
}

TierPlan plan_tiers(const TierInputs& in) {
    if (in.slot_bytes == 0 || in.experts < 0) throw_internal("plan_tiers: no slot size or a negative expert count");
    TierPlan p;
    p.gpu_budget = in.gpu_cap ? std::min(in.gpu_free, in.gpu_cap) : in.gpu_free;
    p.headroom = plan_headroom(in.headroom, p.gpu_budget);
    const std::uint64_t needed = in.resident_bytes + p.headroom;
    if (needed > p.gpu_budget)
        throw Error(ErrorKind::device, "the model's resident part (" + mib(in.resident_bytes) + ") and the headroom (" + mib(p.headroom) +
                     ") need " + mib(needed - p.gpu_budget) + " more than the GPU offers (" + mib(p.gpu_budget) +
                     (in.gpu_cap && in.gpu_cap < in.gpu_free ? ", the --gpu-mib cap" : " free") + ")");
    std::uint64_t slab_room = p.gpu_budget - needed;
    if (in.slab_cap) slab_room = std::min(slab_room, *in.slab_cap);
    p.gpu_slots = std::min<std::int64_t>(in.experts, std::int64_t(slab_room / in.slot_bytes));
    p.slab_bytes = std::uint64_t(p.gpu_slots) * in.slot_bytes;

    const std::uint64_t host_room = in.host_available > in.host_reserve ? in.host_available - in.host_reserve : 0;
    if (in.host_pool && *in.host_pool > host_room)
        throw_usage("--host-pool-mib " + std::to_string(*in.host_pool / kMiB) + " is more than the " + mib(host_room) +
                    " the host has available after the " + mib(in.host_reserve) + " reserve");
    const std::uint64_t pool_room = in.host_pool ? *in.host_pool : host_room;
    p.host_slots = std::min<std::int64_t>(in.experts - p.gpu_slots, std::int64_t(pool_room / in.slot_bytes));
    p.pool_bytes = std::uint64_t(p.host_slots) * in.slot_bytes;
    p.ssd_experts = in.experts - p.gpu_slots - p.host_slots;
    // The staging slots besides the pool: the pool shrinks until both fit the host's room (each
    // slot it gives up moves one expert to the SSD, which may want one staging slot more: repeat).
    const std::uint64_t sb = p.staging_slot_bytes(in);
    while (p.ssd_experts > 0 && in.staging_max > 0) {
        p.staging_slots = std::min(in.staging_max, p.ssd_experts);
        p.staging_bytes = std::uint64_t(p.staging_slots) * sb;
        if (p.staging_bytes > host_room)
            throw_usage("the " + std::to_string(p.ssd_experts) + " experts left on the SSD need " + mib(p.staging_bytes) +
                        " of pinned staging slots, more than the " + mib(host_room) + " the host has available after the " +
                        mib(in.host_reserve) + " reserve (--host-pool-reserve-mib)");
        if (p.pool_bytes + p.staging_bytes <= host_room) break;
        const std::uint64_t excess = p.pool_bytes + p.staging_bytes - host_room;
        const std::int64_t give = std::int64_t((excess + in.slot_bytes - 1) / in.slot_bytes);
        p.host_slots -= std::min(give, p.host_slots);
        p.pool_bytes = std::uint64_t(p.host_slots) * in.slot_bytes;
        p.ssd_experts = in.experts - p.gpu_slots - p.host_slots;
    }
    return p;
}

std::uint64_t TierPlan::staging_slot_bytes(const TierInputs& in) const {
    return in.staging_slot_bytes ? in.staging_slot_bytes : (in.slot_bytes + 4095) / 4096 * 4096;
}

std::string TierPlan::describe(const TierInputs& in) const {
    std::string s = "experts: " + std::to_string(gpu_slots) + " of " + std::to_string(in.experts) + " on the GPU (" +
                    mib(slab_bytes) + " slab: " + mib(gpu_budget) + (in.gpu_cap && in.gpu_cap < in.gpu_free ? " cap" : " free") +
                    " less " + mib(in.resident_bytes) + " resident and " + mib(headroom) + " headroom" +
                    (in.slab_cap ? ", --gpu-expert-mib " + mib(*in.slab_cap) : std::string()) + "), " +
                    std::to_string(host_slots) + " in the pinned host pool (" + mib(pool_bytes) +
                    (in.host_pool ? ", --host-pool-mib" : ": MemAvailable less the " + mib(in.host_reserve) + " reserve") +
                    "), " + std::to_string(ssd_experts) + " on the SSD" +
                    (staging_slots > 0 ? " (read into " + std::to_string(staging_slots) + " pinned staging slots, " +
                                             mib(staging_bytes) + ", when routed to)"
                                       : std::string()) +
                    "; " + mib(in.slot_bytes) + " a slot";
    return s;
}

}  // namespace aff::placement
