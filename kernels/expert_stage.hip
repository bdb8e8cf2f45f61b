// Staging of bus-read experts for the prefill GEMMs (contract in expert_stage.hpp). The pick:
// one block, a thread an expert; an expert's slot is its rank among the candidates by job count
// (more jobs first, then the lower id), so the busiest get the slots whatever the launch order,
// and the slot an expert lands in never changes a value (the bytes are the same). The copy: a
// grid of (shares of an extent, slots); each thread keeps copy_depth (4 or 8) independent
// 16-byte loads in flight, four as the streaming read that measures the bus ceiling does
// (kernels/stream_read.hip), so a block has 16 or 32 KiB in flight and the number of blocks
// sets the bytes queued on the bus; or, with copy_bulk, the bulk copy (one thread and the TMA
// unit a block, copy_depth chunks of copy_chunk_kib in flight).
// The decode prefetch's priorities (sums of rank weights in shared memory: integers, so the
// order of the atomics does not matter) and its hit count (an expert counted at its first job).
#include "kernels/expert_stage.hpp"

#include <algorithm>
#include <atomic>

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

// The bulk copy (ExpertStageArgs::copy_bulk): thread 0 of a block walks its share in chunks of
// `chunk` bytes through a ring of Depth chunks in shared memory, a load (global to shared,
// completing on the chunk's mbarrier) and a store (shared to global, a bulk group) each; a
// chunk's buffer is loaded again only after the store that read it has read it (wait_group.read),
// so Depth loads stay in flight. Parity: the u-th use of a buffer completes its barrier's phase u.
// The SM runs one thread and the TMA unit: no load slots held, which is the point. Built for
// sm_90 and later only; expert_stage launches it only where it was (bulk_copy_built).
constexpr int kBulkThreads = 32;

#if defined(AFF_GPU_IS_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define AFF_EXPERT_STAGE_BULK 1
__device__ inline unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ inline void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ inline void bulk_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}
#endif

template <int Depth>
__global__ void __launch_bounds__(kBulkThreads)
    expert_stage_bulk_kernel(const uint8_t* const* __restrict__ sources, uint8_t* __restrict__ slots, size_t stride,
                             size_t bytes, size_t per, unsigned chunk) {
    const uint8_t* src = sources[dev::block_y()];
    if (!src) return;
    const size_t first = static_cast<size_t>(dev::block_x()) * per;  // per and chunk: multiples of 16
    const size_t end = first + per < bytes ? first + per : bytes;
    if (first >= end) return;
    uint8_t* dst = slots + static_cast<size_t>(dev::block_y()) * stride;
#if defined(AFF_EXPERT_STAGE_BULK)
    extern __shared__ __align__(128) uint8_t ring[];  // Depth chunks
    __shared__ __align__(8) unsigned long long full[Depth];
    if (dev::thread_x() != 0) return;
    for (int d = 0; d < Depth; ++d)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&full[d])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const size_t chunks = (end - first + chunk - 1) / chunk;
    auto chunk_bytes = [&](size_t c) {
        const size_t at = first + c * chunk;
        return static_cast<unsigned>(end - at < chunk ? end - at : chunk);
    };
    auto load = [&](size_t c) {
        const int b = static_cast<int>(c % Depth);
        bulk_load(shared_address(ring + b * chunk), src + first + c * chunk, chunk_bytes(c), shared_address(&full[b]));
    };
    for (size_t c = 0; c < chunks && c < static_cast<size_t>(Depth); ++c) load(c);
    for (size_t c = 0; c < chunks; ++c) {
        const int b = static_cast<int>(c % Depth);
        bulk_wait(shared_address(&full[b]), static_cast<unsigned>((c / Depth) & 1));
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + first + c * chunk),
                     "r"(shared_address(ring + b * chunk)), "r"(chunk_bytes(c))
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        if (c + Depth < chunks) {
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // buffer b read: reload it
            load(c + Depth);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // the slot written before the grid ends
#else
    // Not built for the bulk unit (expert_stage does not launch this then): the threads' copy.
    (void)chunk;
    const uint4* from = reinterpret_cast<const uint4*>(src);
    uint4* to = reinterpret_cast<uint4*>(dst);
    for (size_t i = first / 16 + dev::thread_x(); i < end / 16; i += kBulkThreads) to[i] = dev::load_stream(from + i);
#endif
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

// Whether expert_stage_bulk_kernel holds the bulk copy on this device (built for sm_90 or
// later), asked of the runtime once per device: a build for older targets JIT-compiles the
// fallback loop, which a bulk request must not get in place of the threads' wide copy.
bool bulk_copy_built() {
#if defined(AFF_GPU_IS_CUDA)
    constexpr int kChunkMax = 16 << 10;  // the largest ExpertStageArgs::copy_chunk_kib
    static std::atomic<unsigned long long> known{0}, built{0};
    int dev = 0;
    AFF_GPU_CHECK(cudaGetDevice(&dev));
    const unsigned long long bit = 1ull << (dev & 63);
    if (!(known.load() & bit)) {
        cudaFuncAttributes attr{};
        AFF_GPU_CHECK(cudaFuncGetAttributes(&attr, expert_stage_bulk_kernel<4>));
        if (attr.binaryVersion >= 90) {
            // The ring is over the default 48 KiB of dynamic shared memory: opt in, per function and device.
            AFF_GPU_CHECK(cudaFuncSetAttribute(expert_stage_bulk_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               4 * kChunkMax));
            AFF_GPU_CHECK(cudaFuncSetAttribute(expert_stage_bulk_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               8 * kChunkMax));
            built.fetch_or(bit);
        }
        known.fetch_or(bit);
    }
    return built.load() & bit;
#else
    return false;
#endif
}

template <int Depth>
void launch_bulk(dim3 grid, std::size_t ring, hipStream_t s, const uint8_t* const* sources, uint8_t* slots,
                 std::size_t stride, std::size_t bytes, std::size_t per, unsigned chunk) {
    expert_stage_bulk_kernel<Depth><<<grid, dim3(kBulkThreads), ring, s>>>(sources, slots, stride, bytes, per, chunk);
    AFF_GPU_CHECK(hipGetLastError());
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
    if (a.copy_chunk_kib != 4 && a.copy_chunk_kib != 8 && a.copy_chunk_kib != 16)
        throw_argument("expert_stage", "copy_chunk_kib must be 4, 8 or 16");
    const hipStream_t s = static_cast<hipStream_t>(stream);
    expert_stage_pick_kernel<<<dim3(1), dim3(kPickThreads), 0, s>>>(a);
    AFF_GPU_CHECK(hipGetLastError());
    if (a.slot_count == 0) return;
    const std::size_t n16 = a.bytes / 16;
    const unsigned chunks = static_cast<unsigned>((a.bytes + kChunk - 1) / kChunk);
    const unsigned blocks = a.copy_blocks > 0 ? std::min(chunks, static_cast<unsigned>(a.copy_blocks)) : chunks;
    const std::size_t per = (n16 + blocks - 1) / blocks;
    const dim3 grid(blocks, static_cast<unsigned>(a.slot_count));
    if (a.copy_bulk && bulk_copy_built()) {
        const unsigned chunk = static_cast<unsigned>(a.copy_chunk_kib) << 10;
        const std::size_t ring = std::size_t(a.copy_depth) * chunk;
        if (a.copy_depth == 8)
            launch_bulk<8>(grid, ring, s, a.slot_source, a.slots, a.slot_stride, a.bytes, per * 16, chunk);
        else
            launch_bulk<4>(grid, ring, s, a.slot_source, a.slots, a.slot_stride, a.bytes, per * 16, chunk);
        return;
    }
    if (a.copy_depth == 8)
        expert_stage_copy_kernel<8><<<grid, dim3(kCopyThreads), 0, s>>>(a.slot_source, a.slots, a.slot_stride, n16, per);
    else
        expert_stage_copy_kernel<4><<<grid, dim3(kCopyThreads), 0, s>>>(a.slot_source, a.slots, a.slot_stride, n16, per);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
