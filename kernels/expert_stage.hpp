// Prefill on a tiered model (issue 17): moe_gemm reads an expert's matrix once per tile of 64 of
// its jobs, so an expert the kernels read over the bus (the host pool or an SSD staging slot:
// mapped pinned host memory) that a long chunk routes many tokens to crosses the slowest link
// several times. expert_stage copies such experts once into device scratch slots and writes a
// per-call copy of the layer's expert table pointing at them; moe_gemm then reads the same bytes
// from HBM (same kernel, same bytes, same order: the logits do not change). Which experts: those
// the table points into one of the `far` address ranges with at least min_jobs jobs, busiest
// first while slots last (the rest keep their entries and are read in place, as without this
// step). Everything is decided on the device from moe_group's counts: no host round trip. A
// copy with counts; its tests are tests/gpu/expert_stage_test.cpp (family `expert_stage`: the
// picks, table, slots and counters on synthetic tables, the priorities and hits below) and the tiered model's logits
// (tests/gpu/tiers_test.cpp, family `tiers`), its speed tests/bench/prefill_tiers_bench.cpp. Host-callable declarations only;
// device code in expert_stage.hip.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aff::gpu {

inline constexpr int kExpertStageMaxExperts = 1024;  // moe_gemm's limit too
inline constexpr int kExpertStageFarRanges = 2;      // the host pool, the SSD staging slots

// Counters expert_stage adds to (device, uint32 each; they wrap after 2^32): over its calls,
// experts staged, far experts routed but left in place (below min_jobs, or no slot left), the
// 64-job tiles of the experts left in place (each reads its matrix over the bus once per GEMM)
// and the tiles of the staged ones (what they would have read in place).
enum ExpertStageCounter { kStagedExperts = 0, kInPlaceExperts, kInPlaceTiles, kStagedTiles, kExpertStageCounters };

struct ExpertStageArgs {
    const std::uint8_t* const* table = nullptr;  // the layer's expert table [experts] (device)
    int experts = 0;                             // 1 .. kExpertStageMaxExperts
    const std::int32_t* counts = nullptr;        // jobs per expert [experts] (device: moe_group_counts)
    int min_jobs = 1;                            // staged only with at least this many jobs (>= 1)
    int tile_jobs = 64;                          // jobs a GEMM tile (kMoeGemmTileM): for the counters
    // Address ranges [lo, hi) read over the bus (device view); an empty range has lo == hi.
    const std::uint8_t* far_lo[kExpertStageFarRanges] = {};
    const std::uint8_t* far_hi[kExpertStageFarRanges] = {};
    std::uint8_t* slots = nullptr;               // slot_count slots, slot_stride apart (device, 16-byte aligned)
    std::size_t slot_stride = 0;
    int slot_count = 0;                          // 0: counts only, nothing copied
    std::size_t bytes = 0;                       // copied an expert: a multiple of 16, at most slot_stride, readable at the source
    // Blocks that copy one slot: 0, one a 64 KiB chunk (all the bus can take, for the prefill
    // where nothing else runs); else that many, each a contiguous share (the decode prefetch:
    // few enough bytes in flight that the attention kernels beside it keep their SMs' memory
    // queues; GpuTierOptions::prefetch_copy_blocks). The bytes copied are the same either way.
    int copy_blocks = 0;
    // 16-byte loads each copy thread keeps in flight: 4 (a block 16 KiB) or 8 (32 KiB: as many
    // bytes on the bus from half the blocks, so fewer multiprocessors share their queues with
    // the kernels beside the copy; tests/bench/copy_interference_bench.cpp).
    int copy_depth = 4;
    // Hopper's bulk copies (cp.async.bulk through the TMA unit) instead of the threads' loads:
    // one thread a block keeps copy_depth chunks of copy_chunk_kib (4, 8 or 16) in flight from
    // the source into shared memory and on into the slot, so the copy holds no load slots of
    // the SM it runs on (the threads' copy slows the kernels beside it through them; tests/
    // bench/copy_interference_bench.cpp), only copy_depth x copy_chunk_kib of its shared memory.
    // Where the kernel was not built for sm_90 or later (AMD, older NVIDIA), the threads' copy
    // runs instead: the same bytes land either way.
    bool copy_bulk = false;
    int copy_chunk_kib = 16;
    const std::uint8_t** stage_table = nullptr;  // out [experts]: the table the GEMMs read (device)
    const std::uint8_t** slot_source = nullptr;  // scratch [max(1, slot_count)] (device)
    std::uint32_t* counters = nullptr;           // [kExpertStageCounters] (device), added to; null: none
};

// Two launches on `stream`: one block picks the experts, fills stage_table and slot_source and
// adds to the counters; then a grid copies each picked expert's `bytes` into its slot (16-byte
// loads, or bulk copies with copy_bulk; copy_blocks blocks a slot, or one a 64 KiB chunk; blocks
// of slots left empty return at once).
void expert_stage(const ExpertStageArgs& a, void* stream);

// Decode steps (issue 17's prefetch, GpuModel::Impl::prefetch_predicted): the same pick and
// copy, fed with a predicted routing instead of moe_group's counts, so that a layer's predicted
// pooled experts cross the bus while its attention runs and its MoE reads them from HBM.
// expert_stage_priorities writes counts [experts] from `jobs` routed ids [jobs / top_k][top_k]
// (each token's in the router's order, best first): an expert's count is the sum over the
// tokens that chose it of top_k − its rank there, 0 for the rest; so the pick takes the
// experts most tokens rank highest first. One block, jobs at most kExpertStageMaxJobs.
inline constexpr int kExpertStageMaxJobs = 1024;
void expert_stage_priorities(const std::int32_t* ids, int jobs, int top_k, int experts, std::int32_t* counts,
                             void* stream);
// After the router: adds to *counter the experts among `jobs` routed ids whose stage_table
// entry differs from the layer's table (each such expert once, however many tokens chose it):
// the prefetched experts the MoE then read. One block.
void expert_stage_hits(const std::int32_t* ids, int jobs, const std::uint8_t* const* table,
                       const std::uint8_t* const* stage_table, std::uint32_t* counter, void* stream);

}  // namespace aff::gpu
