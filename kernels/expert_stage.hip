// Staging of bus-read experts for the prefill GEMMs (contract in expert_stage.hpp). The pick:
// one block, a thread an expert; an expert's slot is its rank among the candidates by job count
// (more jobs first, then the lower id), so the busiest get the slots whatever the launch order,
// and the slot an expert lands in never changes a value (the bytes are the same). The copy: a
// grid of (shares of an extent, slots); each thread keeps copy_depth (4 or 8) independent
// 16-byte loads in flight, four as the streaming read that measures the bus ceiling does
// (kernels/stream_read.hip), so a block has 16 or 32 KiB in flight and the number of blocks
// sets the bytes queued on the bus.
// The decode prefetch's priorities (sums of rank weights in shared memory: integers, so the
// order of the atomics does not matter) and its hit count (an expert counted at its first job).
#include "kernels/expert_stage.hpp"

#include <algorithm>

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kPickThreads = 1024;
constexpr int kCopyThreads = 256;
constexpr std::size_t kChunk = 64u << 10;  // bytes a copy block moves with copy_blocks 0

__device__ inline bool is_far(const uint8_t* p, const ExpertStageArgs& a) {
    if (!p) return false;  // an SSD expert no call routed to since it was dropped: nothing to read
#pragma unroll
    for (int r = 0; r < kExpertStageFarRanges; ++r)
        if (p >= a.far_lo[r] && p < a.far_hi[r]) return true;
    return false;
}

__global__ void __launch_bounds__(kPickThreads) expert_stage_pick_kernel(ExpertStageArgs a) {
    __shared__ int candidate[kExpertStageMaxExperts];  // job count of a far expert with >= min_jobs, else 0
    __shared__ unsigned sums[kExpertStageCounters];
    const int tid = static_cast<int>(dev::thread_x());
    if (tid < kExpertStageCounters) sums[tid] = 0;
    for (int e = tid; e < a.experts; e += kPickThreads) {
        const int c = a.counts[e];
        candidate[e] = is_far(a.table[e], a) && c >= a.min_jobs ? c : 0;
    }
    dev::sync_block();
    for (int e = tid; e < a.experts; e += kPickThreads) {
        const uint8_t* p = a.table[e];
        const int c = a.counts[e];
        const unsigned tiles = static_cast<unsigned>((c + a.tile_jobs - 1) / a.tile_jobs);
        int rank = a.slot_count;
        if (candidate[e] > 0) {
            rank = 0;
            for (int f = 0; f < a.experts; ++f)
                rank += candidate[f] > c || (candidate[f] == c && f < e) ? 1 : 0;
        }
        if (rank < a.slot_count) {
            a.stage_table[e] = a.slots + static_cast<size_t>(rank) * a.slot_stride;
            a.slot_source[rank] = p;
            dev::atomic_add(&sums[kStagedExperts], 1u);
            dev::atomic_add(&sums[kStagedTiles], tiles);
        } else {
            a.stage_table[e] = p;
            if (c > 0 && is_far(p, a)) {
                dev::atomic_add(&sums[kInPlaceExperts], 1u);
                dev::atomic_add(&sums[kInPlaceTiles], tiles);
            }
        }
    }
    dev::sync_block();
    // The slots no expert took: their copy blocks return.
    for (int s = static_cast<int>(sums[kStagedExperts]) + tid; s < a.slot_count; s += kPickThreads) a.slot_source[s] = nullptr;
    if (a.counters && tid < kExpertStageCounters) dev::atomic_add(&a.counters[tid], sums[tid]);
}

template <int Depth>
__global__ void __launch_bounds__(kCopyThreads)
    expert_stage_copy_kernel(const uint8_t* const* __restrict__ sources, uint8_t* __restrict__ slots, size_t stride,
                             size_t n16, size_t per) {
    const uint8_t* src = sources[dev::block_y()];
    if (!src) return;
    // A block's share: n16 over the blocks of a slot (the host passes them as `per`).
    const size_t first = static_cast<size_t>(dev::block_x()) * per;
    const size_t end = first + per < n16 ? first + per : n16;
    const uint4* from = reinterpret_cast<const uint4*>(src);
    uint4* to = reinterpret_cast<uint4*>(slots + static_cast<size_t>(dev::block_y()) * stride);
    size_t i = first + dev::thread_x();
    for (; i + (Depth - 1) * kCopyThreads < end; i += Depth * kCopyThreads) {
        uint4 w[Depth];
#pragma unroll
        for (int d = 0; d < Depth; ++d) w[d] = dev::load_stream(from + i + d * kCopyThreads);
#pragma unroll
        for (int d = 0; d < Depth; ++d) to[i + d * kCopyThreads] = w[d];
    }
    for (; i < end; i += kCopyThreads) to[i] = dev::load_stream(from + i);
}

__global__ void __launch_bounds__(kPickThreads)
    expert_stage_priorities_kernel(const int32_t* ids, int jobs, int top_k, int experts, int32_t* counts) {
    __shared__ unsigned sums[kExpertStageMaxExperts];
    const int tid = static_cast<int>(dev::thread_x());
    for (int e = tid; e < experts; e += kPickThreads) sums[e] = 0;
    dev::sync_block();
    for (int j = tid; j < jobs; j += kPickThreads) {
        const int e = ids[j];
        if (e >= 0 && e < experts) dev::atomic_add(&sums[e], static_cast<unsigned>(top_k - j % top_k));
    }
    dev::sync_block();
    for (int e = tid; e < experts; e += kPickThreads) counts[e] = static_cast<int32_t>(sums[e]);
}

__global__ void __launch_bounds__(kPickThreads)
    expert_stage_hits_kernel(const int32_t* ids, int jobs, const uint8_t* const* table, const uint8_t* const* stage_table,
                             unsigned* counter) {
    __shared__ unsigned hits;
    const int tid = static_cast<int>(dev::thread_x());
    if (tid == 0) hits = 0;
    dev::sync_block();
    for (int j = tid; j < jobs; j += kPickThreads) {
        const int e = ids[j];
        bool first = stage_table[e] != table[e];
        for (int i = 0; first && i < j; ++i) first = ids[i] != e;  // an expert once, at its first job
        if (first) dev::atomic_add(&hits, 1u);
    }
    dev::sync_block();
    if (tid == 0 && hits) dev::atomic_add(counter, hits);
}

}  // namespace

void expert_stage_priorities(const std::int32_t* ids, int jobs, int top_k, int experts, std::int32_t* counts,
                             void* stream) {
    if (experts < 1 || experts > kExpertStageMaxExperts) throw_argument("expert_stage_priorities", "experts must be 1..1024");
    if (top_k < 1 || jobs < 0 || jobs > kExpertStageMaxJobs || jobs % top_k != 0)
        throw_argument("expert_stage_priorities", "jobs must be whole tokens of top_k ids, at most 1024");
    if (!ids || !counts) throw_argument("expert_stage_priorities", "null ids or counts");
    expert_stage_priorities_kernel<<<dim3(1), dim3(kPickThreads), 0, static_cast<hipStream_t>(stream)>>>(
        ids, jobs, top_k, experts, counts);
    AFF_GPU_CHECK(hipGetLastError());
}

void expert_stage_hits(const std::int32_t* ids, int jobs, const std::uint8_t* const* table,
                       const std::uint8_t* const* stage_table, std::uint32_t* counter, void* stream) {
    if (jobs < 0 || jobs > kExpertStageMaxJobs) throw_argument("expert_stage_hits", "at most 1024 jobs");
    if (!ids || !table || !stage_table || !counter) throw_argument("expert_stage_hits", "null argument");
    expert_stage_hits_kernel<<<dim3(1), dim3(kPickThreads), 0, static_cast<hipStream_t>(stream)>>>(
        ids, jobs, table, stage_table, counter);
    AFF_GPU_CHECK(hipGetLastError());
}

void expert_stage(const ExpertStageArgs& a, void* stream) {
    if (a.experts < 1 || a.experts > kExpertStageMaxExperts) throw_argument("expert_stage", "experts must be 1..1024");
    if (!a.table || !a.counts || !a.stage_table || !a.slot_source) throw_argument("expert_stage", "null table or counts");
    if (a.min_jobs < 1 || a.tile_jobs < 1) throw_argument("expert_stage", "min_jobs and tile_jobs must be positive");
    if (a.slot_count < 0 || (a.slot_count > 0 && !a.slots)) throw_argument("expert_stage", "slots missing");
    if (a.slot_count > 0 && (a.bytes == 0 || a.bytes % 16 != 0 || a.bytes > a.slot_stride || a.slot_stride % 16 != 0 ||
                             reinterpret_cast<std::uintptr_t>(a.slots) % 16 != 0))
        throw_argument("expert_stage", "bytes must be a positive multiple of 16 within 16-byte aligned slots");
    if (a.slot_count > 65535) throw_argument("expert_stage", "at most 65535 slots");
    if (a.copy_blocks < 0) throw_argument("expert_stage", "copy_blocks must be 0 or positive");
    if (a.copy_depth != 4 && a.copy_depth != 8) throw_argument("expert_stage", "copy_depth must be 4 or 8");
    const hipStream_t s = static_cast<hipStream_t>(stream);
    expert_stage_pick_kernel<<<dim3(1), dim3(kPickThreads), 0, s>>>(a);
    AFF_GPU_CHECK(hipGetLastError());
    if (a.slot_count == 0) return;
    const std::size_t n16 = a.bytes / 16;
    const unsigned chunks = static_cast<unsigned>((a.bytes + kChunk - 1) / kChunk);
    const unsigned blocks = a.copy_blocks > 0 ? std::min(chunks, static_cast<unsigned>(a.copy_blocks)) : chunks;
    const std::size_t per = (n16 + blocks - 1) / blocks;
    const dim3 grid(blocks, static_cast<unsigned>(a.slot_count));
    if (a.copy_depth == 8)
        expert_stage_copy_kernel<8><<<grid, dim3(kCopyThreads), 0, s>>>(a.slot_source, a.slots, a.slot_stride, n16, per);
    else
        expert_stage_copy_kernel<4><<<grid, dim3(kCopyThreads), 0, s>>>(a.slot_source, a.slots, a.slot_stride, n16, per);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
