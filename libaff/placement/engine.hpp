// The placement engine: where every expert is, what serving a dispatch costs, and the
// policy's decisions applied under the hardware's cost model. The same object will drive
// the GPU expert store (it executes these moves); aff-trace replay drives it from a trace.
//
// Cost model (what the hardware does), per distinct expert of a dispatch:
//   on the GPU   its bytes are read from HBM;
//   in host RAM  they stream over PCIe once (the kernel reads pinned memory, or a copy);
//   on SSD       they are read from SSD into host memory, then stream over PCIe once.
// An admitted miss's streamed bytes fill its GPU slot (no second transfer). Its victim goes
// back to the host pool over PCIe (the second transfer of a swap) when the pool has room,
// else it is dropped (the SSD always holds it). Both directions count against one PCIe
// budget. Hash-routed layers are known from the token ids before the step, so their
// transfers are prefetched exactly: they are counted (bytes, "prefetched") but are never a
// miss the step waits for.
#pragma once

#include "libaff/placement/policy.hpp"
#include "libaff/placement/tiers.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace aff::placement {

struct Counters {
    std::uint64_t dispatches = 0;
    std::uint64_t accesses = 0;              // distinct experts over all dispatches
    std::uint64_t gpu_hits = 0, host_hits = 0, ssd_reads = 0;
    std::uint64_t hash_accesses = 0, hash_prefetched = 0;  // hash-layer accesses; those not on the GPU
    std::uint64_t selections = 0, selection_gpu_hits = 0;  // token-weighted
    std::uint64_t admissions = 0, demotions_to_host = 0, drops = 0;
    std::uint64_t hbm_bytes = 0, pcie_bytes = 0, ssd_bytes = 0;
};

class PlacementEngine {
public:
    // order: the initial placement order (tiers.hpp profile_order); the policy's start() is
    // called. first_use: each key's first dispatch (kNever: none), for offline policies.
    PlacementEngine(Geometry geometry, Slots slots, std::span<const ExpertKey> order, Policy& policy,
                    std::span<const std::uint64_t> first_use = {});

    // Serves one dispatch (d.tiers is filled here), then applies the policy's admissions.
    // Throws aff::Error (internal) when the policy breaks the decision interface's rules.
    void dispatch(Dispatch d);

    Tier tier(ExpertKey key) const { return tiers_[key]; }
    std::uint32_t gpu_used() const { return gpu_used_; }
    std::uint32_t host_used() const { return host_used_; }
    const Slots& slots() const { return slots_; }
    const Geometry& geometry() const { return geometry_; }
    const Counters& counters() const { return counters_; }

private:
    Geometry geometry_;
    Slots slots_;
    Policy& policy_;
    std::vector<Tier> tiers_;
    std::uint32_t gpu_used_ = 0, host_used_ = 0;
    Counters counters_;
    std::vector<Tier> scratch_tiers_;
    std::vector<Admission> scratch_admissions_;
};

}  // namespace aff::placement
