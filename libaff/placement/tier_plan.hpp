// How many routed experts each tier holds (GPU slab, pinned host pool, SSD), from the memory there
// is: the arithmetic the expert tiers (libaff/gpu) size themselves with, pure so that it is tested
// on the CPU and printed the same way at start-up by every tool. The GPU slab takes what the device
// has left after everything that must be resident (dense weights, decode state, activations) and a
// headroom (CUDA/HIP context growth, graphs, allocator slack), capped by --gpu-mib (the whole GPU)
// and --gpu-expert-mib (the slab alone, for runs that emulate a smaller card); the host pool
// takes MemAvailable less a reserve for the rest of the system, or --host-pool-mib; every other
// expert stays in the container on the SSD. Slots are layer-agnostic: any slot holds any layer's
// expert, so the counts are over all (layer, expert) pairs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace aff::placement {

inline constexpr std::uint64_t kMiB = 1024 * 1024;
inline constexpr std::uint64_t kDefaultHostReserve = 1536 * kMiB;

struct TierInputs {
    std::uint64_t gpu_free = 0;        // bytes free on the device before the model is loaded
    std::uint64_t gpu_cap = 0;         // --gpu-mib in bytes; 0: no cap
    std::optional<std::uint64_t> slab_cap;  // --gpu-expert-mib: the slab at most this; unset: what is left
    std::uint64_t resident_bytes = 0;  // dense weights + decode state + activations
    std::optional<std::uint64_t> headroom;  // --gpu-headroom-mib; unset: derived (derived_headroom)
    std::uint64_t host_available = 0;  // the host's MemAvailable
    std::uint64_t host_reserve = kDefaultHostReserve;  // --host-pool-reserve-mib
    std::optional<std::uint64_t> host_pool;            // --host-pool-mib; unset: what is available
    std::uint64_t slot_bytes = 0;      // one expert's slot (its extent rounded up to the slot alignment)
    std::int64_t experts = 0;          // routed (layer, expert) pairs of the model
    // Experts left on the SSD are read into staging slots of pinned host memory: up to this
    // many (one layer's experts: what one dispatch may need at once; 0: none planned), each
    // staging_slot_bytes (0: slot_bytes rounded up to the 4096 bytes of an O_DIRECT block).
    std::int64_t staging_max = 0;
    std::uint64_t staging_slot_bytes = 0;
};

struct TierPlan {
    std::int64_t gpu_slots = 0, host_slots = 0, ssd_experts = 0;
    std::uint64_t gpu_budget = 0;  // min(free, cap)
    std::uint64_t headroom = 0;
    std::uint64_t slab_bytes = 0, pool_bytes = 0;
    // With experts on the SSD: min(staging_max, ssd_experts) staging slots. They come out of the
    // same host memory as the pool: where the host's room (MemAvailable less the reserve) does not
    // hold both, the pool gives up slots (more experts on the SSD).
    std::int64_t staging_slots = 0;
    std::uint64_t staging_bytes = 0;
    // One start-up line: the counts per tier and why (sizes and caps).
    std::string describe(const TierInputs& in) const;
    std::uint64_t staging_slot_bytes(const TierInputs& in) const;
};

// The headroom when none is given: 256 MiB or 3 % of the GPU budget, whichever is more (a CUDA
// context and captured graphs grow by a few hundred MiB on a large model).
std::uint64_t derived_headroom(std::uint64_t gpu_budget);
// The headroom a plan on `gpu_budget` leaves: `given` (--gpu-headroom-mib) or the derived one.
// Also what the GPU model's decision to tier leaves, so that both sides use one rule.
std::uint64_t plan_headroom(const std::optional<std::uint64_t>& given, std::uint64_t gpu_budget);

// Throws a device error naming the MiB missing when even the resident part and the headroom do not
// fit the GPU budget (the only case that is refused: experts that fit nowhere else stay on the SSD),
// a usage error when --host-pool-mib asks for more than MemAvailable less the reserve, and a usage
// error naming the MiB when the host's room does not hold the SSD tier's staging slots.
TierPlan plan_tiers(const TierInputs& in);

}  // namespace aff::placement
