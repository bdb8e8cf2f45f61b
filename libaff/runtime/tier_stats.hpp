// What the expert tiers' mover did, as plain counters: the GPU backend fills them from
// GpuModel::tiers() (GpuTierReport, libaff/gpu/forward.hpp), aff-serve renders them at
// /metrics (aff_tier_*, libaff/serve/metrics.hpp), tests fill them by hand. Reads and hits
// count distinct experts a dispatch (one layer of one call), as the placement engine does;
// the SSD fields stay 0 until the SSD tier exists (the names are fixed now, so dashboards
// need no change when it fills them).
#pragma once

#include <cstdint>

namespace aff {

struct TierStats {
    std::uint64_t tokens = 0;        // tokens of the calls the mover saw
    std::uint64_t expert_reads = 0;  // distinct experts read, over all dispatches
    std::uint64_t gpu_hits = 0, host_hits = 0, ssd_reads = 0;  // of them: from the slab, the pool, the SSD
    std::uint64_t pcie_bytes = 0;    // over the bus: pool reads and the mover's copies
    std::uint64_t ssd_bytes = 0;
    std::uint64_t moves = 0, moved_bytes = 0;
    double stall_seconds = 0;        // the GPU waited on the mover's copies before a call
    std::uint64_t stalled_calls = 0;
    std::int64_t gpu_experts = 0, host_experts = 0, ssd_experts = 0;  // where the experts are now
    // The decode prefetch (--expert-prefetch): pooled experts copied into GPU memory during
    // attention, and how many of them the router then chose.
    std::uint64_t prefetched = 0, prefetch_hits = 0;
};

}  // namespace aff
