// Codebook-expert GEMV (declarations and contract in moe_gemv.hpp). Memory-bound on the
// 2.875-bit weights, so the design keeps 16-byte loads in flight and decodes from shared
// memory. A block of 256 threads copies the 16 KiB codebook into shared memory once and its
// 8 warps then walk work items (2 consecutive rows of one job) with a stride over the grid.
// A warp loads an item's rows with coalesced 16-byte loads into registers, parks them in its
// own shared-memory stage and, while decoding them, already has the next item's loads in
// flight. Decoding: lane l owns step pairs l and l + 32 of every block (weights 4l..4l+3 and
// 128+4l..128+4l+3), whose bit offsets are fixed by the lane alone (format §4): the 32 bits
// ending at the pair's last fresh bit come from two stage words by a funnel shift and hold
// both 12-bit windows. No data-dependent branch; block scale applied once per block.
#include "kernels/moe_gemv.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

#include <algorithm>

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int kRows = 2;                   // rows per work item
constexpr int kMaxK = 4096;
constexpr int kBlockBytes = 92;            // 256 weights
constexpr int kBlockWords = kBlockBytes / 4;
constexpr int kMaxRowChunks = kMaxK / 256 * kBlockBytes / 16;             // 92 uint4 a row
constexpr int kChunksPerLane = (kMaxRowChunks + kWarp - 1) / kWarp;      // 3
constexpr int kEntries = 4096;

struct Jobs {
    MoeGemvJob job[kMoeGemvMaxJobs];
};

__device__ inline uint32_t bswap32(uint32_t u) {
#if defined(AFF_GPU_IS_CUDA)
    return __byte_perm(u, 0u, 0x0123);
#else
    return __builtin_bswap32(u);
#endif
}

__device__ inline void sync_warp() {
#if defined(AFF_GPU_IS_CUDA)
    __syncwarp();
#else
    __builtin_amdgcn_wave_barrier();
#endif
}

// A codebook entry (c0 in the low half, c1 in the high half) as two floats.
__device__ inline void entry_to_float2(uint32_t u, float& c0, float& c1) {
#if defined(AFF_GPU_IS_CUDA)
    __half2_raw raw;
    raw.x = static_cast<unsigned short>(u & 0xffffu);
    raw.y = static_cast<unsigned short>(u >> 16);
    const float2 f = __half22float2(__half2(raw));
    c0 = f.x;
    c1 = f.y;
#else
    c0 = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<unsigned short>(u & 0xffffu)));
    c1 = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<unsigned short>(u >> 16)));
#endif
}

// Where step pair p (steps 2p, 2p+1) of a block finds its bits: the pair's fresh bits end at
// hi = e_{2p+1}; the 32 stream bits before hi lie in words j-1, j (j = (hi-1)/32) shifted
// right by 32(j+1) - hi. Word -1 reads as zero (the all-zero start of the window).
struct PairBits {
    int word;        // j
    uint32_t shift;  // 32(j+1) - hi
    uint32_t k1;     // fresh bits of step 2p+1
    uint32_t lo_mask;
};

__device__ inline PairBits pair_bits(int p) {
    const int q = p & 3;
    const int hi = 45 * (p >> 2) + (q == 0 ? 11 : q == 1 ? 23 : q == 2 ? 34 : 45);
    PairBits b;
    b.word = (hi - 1) >> 5;
    b.shift = static_cast<uint32_t>(32 * (b.word + 1) - hi);
    b.k1 = q == 0 ? 5u : 6u;
    b.lo_mask = b.word > 0 ? ~0u : 0u;
    return b;
}

// The two windows of a pair, from the block's words (in stage or global memory order).
__device__ inline void pair_windows(const uint32_t* block_words, const PairBits& b, uint32_t& w0, uint32_t& w1) {
    const uint32_t hi_word = bswap32(block_words[b.word]);
    const uint32_t lo_word = bswap32(block_words[b.word > 0 ? b.word - 1 : 0]) & b.lo_mask;
    const uint64_t both = (static_cast<uint64_t>(lo_word) << 32) | hi_word;
    const uint32_t g = static_cast<uint32_t>(both >> b.shift);
    w1 = g & 0xfffu;
    w0 = (g >> b.k1) & 0xfffu;
}

// The block scale: bf16 in bytes 90..91, i.e. the high half of word 22; as float bits.
__device__ inline float block_scale(const uint32_t* block_words) {
    return dev::bits_to_float(block_words[kBlockWords - 1] & 0xffff0000u);
}

__device__ inline void load_codebook(const uint16_t* codebook, uint32_t* cb) {
    const uint4* src = reinterpret_cast<const uint4*>(codebook);
    uint4* dst = reinterpret_cast<uint4*>(cb);
    for (int i = static_cast<int>(dev::thread_x()); i < kEntries / 4; i += kThreads) dst[i] = src[i];
}

// Job i: from the launch's own list, or (device_jobs set: graph replay) from device memory.
__device__ inline MoeGemvJob job_at(const Jobs& jobs, const MoeGemvJob* device_jobs, int i) {
    return device_jobs ? device_jobs[i] : jobs.job[i];
}

template <int B>
__global__ void __launch_bounds__(kThreads)
    moe_gemv_kernel(Jobs jobs, const MoeGemvJob* __restrict__ device_jobs, int count, int n, int k,
                    const uint16_t* __restrict__ codebook, int total_warps) {
    __shared__ uint32_t cb[kEntries];
    __shared__ uint4 stage[kWarpsPerBlock][kRows][kMaxRowChunks];
    dev::launch_dependents();
    const int lane = static_cast<int>(dev::lane_id());
    const int warp = static_cast<int>(dev::thread_x()) / kWarp;
    const int items_per_job = n / kRows;
    const int row_chunks = k / 256 * kBlockBytes / 16;
    const int blocks = k / 256;
    int item = static_cast<int>(dev::block_x()) * kWarpsPerBlock + warp;
    const int items = items_per_job * count;  // job of an item: item / items_per_job (uniform per warp)

    uint4 buf[kRows][kChunksPerLane];
    auto load_item = [&](int it) {
        const MoeGemvJob jb = job_at(jobs, device_jobs, it / items_per_job);
        const int row0 = (it % items_per_job) * kRows;
        const uint4* w = reinterpret_cast<const uint4*>(jb.w) + static_cast<size_t>(row0) * row_chunks;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int i = 0; i < kChunksPerLane; ++i) {
                const int c = lane + i * kWarp;
                if (c < row_chunks) buf[r][i] = dev::load_stream(w + r * row_chunks + c);
            }
    };
    if (!device_jobs && item < items) load_item(item);
    load_codebook(codebook, cb);
    dev::sync_block();
    dev::wait_prerequisites();  // x may come from the previous kernel; y may still be read by it
    if (device_jobs && item < items) load_item(item);  // a device list may come from the previous kernel too

    const PairBits pa = pair_bits(lane), pb = pair_bits(lane + kWarp);
    while (item < items) {
        sync_warp();  // every lane is done with the stage
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int i = 0; i < kChunksPerLane; ++i) {
                const int c = lane + i * kWarp;
                if (c < row_chunks) stage[warp][r][c] = buf[r][i];
            }
        sync_warp();
        const int job = item / items_per_job;
        const int row0 = (item % items_per_job) * kRows;
        const int next = item + total_warps;
        if (next < items) load_item(next);

        const float* x = job_at(jobs, device_jobs, job).x;
        float acc[B][kRows];
#pragma unroll
        for (int b = 0; b < B; ++b)
#pragma unroll
            for (int r = 0; r < kRows; ++r) acc[b][r] = 0.0f;
        for (int blk = 0; blk < blocks; ++blk) {
            float4 xa[B], xb[B];
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * k + blk * 256);
                xa[b] = dev::ldg(xr + lane);
                xb[b] = dev::ldg(xr + kWarp + lane);
            }
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                const uint32_t* words = reinterpret_cast<const uint32_t*>(&stage[warp][r][0]) + blk * kBlockWords;
                uint32_t a0, a1, b0, b1;
                pair_windows(words, pa, a0, a1);
                pair_windows(words, pb, b0, b1);
                float e[8];
                entry_to_float2(cb[a0], e[0], e[1]);
                entry_to_float2(cb[a1], e[2], e[3]);
                entry_to_float2(cb[b0], e[4], e[5]);
                entry_to_float2(cb[b1], e[6], e[7]);
                const float s = block_scale(words);
#pragma unroll
                for (int b = 0; b < B; ++b) {
                    const float part = e[0] * xa[b].x + e[1] * xa[b].y + e[2] * xa[b].z + e[3] * xa[b].w +
                                       e[4] * xb[b].x + e[5] * xb[b].y + e[6] * xb[b].z + e[7] * xb[b].w;
                    acc[b][r] += s * part;
                }
            }
        }
        float* y = job_at(jobs, device_jobs, job).y;
#pragma unroll
        for (int b = 0; b < B; ++b)
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                const float sum = dev::warp_sum(acc[b][r]);
                if (lane == b * kRows + r) y[static_cast<size_t>(b) * n + row0 + r] = sum;
            }
        item = next;
    }
}

// One thread per step pair: the same window decoder as the GEMV, written out as weights.
__global__ void __launch_bounds__(kThreads)
    tq2875_dequantize_kernel(const uint8_t* __restrict__ w, int rows, int k, const uint16_t* __restrict__ codebook,
                             float* __restrict__ out) {
    __shared__ uint32_t cb[kEntries];
    load_codebook(codebook, cb);
    dev::sync_block();
    const size_t pairs = static_cast<size_t>(rows) * (k / 4);
    const size_t i = static_cast<size_t>(dev::block_x()) * kThreads + dev::thread_x();
    if (i >= pairs) return;
    const size_t block = i / 64;  // 64 pairs a block; blocks of a row follow each other, rows too
    const int p = static_cast<int>(i % 64);
    const uint32_t* words = reinterpret_cast<const uint32_t*>(w + block * kBlockBytes);
    uint32_t w0, w1;
    pair_windows(words, pair_bits(p), w0, w1);
    const float s = block_scale(words);
    float e[4];
    entry_to_float2(cb[w0], e[0], e[1]);
    entry_to_float2(cb[w1], e[2], e[3]);
    float* o = out + block * 256 + 4 * p;
    for (int j = 0; j < 4; ++j) o[j] = s * e[j];
}

void check_shape(const char* what, int n, int k) {
    if (k <= 0 || k % 1024 != 0 || k > kMaxK) throw_argument(what, "k must be a multiple of 1024 up to 4096");
    if (n <= 0 || n % kRows != 0) throw_argument(what, "n must be a positive even number");
}

void launch_moe_gemv(const MoeGemvJob* jobs, const MoeGemvJob* device_jobs, int count, int n, int k, int batch,
                     const uint16_t* codebook, const MoeGemvTuning& t, void* stream) {
    check_shape("moe_gemv", n, k);
    if (count < 1 || (!device_jobs && count > kMoeGemvMaxJobs)) throw_argument("moe_gemv", "job count must be 1..16");
    if (batch < 1 || batch > kMoeGemvMaxBatch) throw_argument("moe_gemv", "batch must be 1..4");
    if (t.target_blocks < 1) throw_argument("moe_gemv", "target_blocks must be positive");
    Jobs j{};
    if (!device_jobs)
        for (int i = 0; i < count; ++i) j.job[i] = jobs[i];
    const int items = count * (n / kRows);
    const int blocks = std::min(t.target_blocks, (items + kWarpsPerBlock - 1) / kWarpsPerBlock);
    const dim3 grid(static_cast<unsigned>(blocks));
    const int total_warps = blocks * kWarpsPerBlock;
    const auto s = static_cast<hipStream_t>(stream);
    auto go = [&](auto kernel) {
#if defined(AFF_GPU_IS_CUDA)
        if (t.dependent_launch) {
            cudaLaunchConfig_t config{};
            config.gridDim = grid;
            config.blockDim = dim3(kThreads);
            config.stream = s;
            cudaLaunchAttribute attribute{};
            attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attribute.val.programmaticStreamSerializationAllowed = 1;
            config.attrs = &attribute;
            config.numAttrs = 1;
            AFF_GPU_CHECK(cudaLaunchKernelEx(&config, kernel, j, device_jobs, count, n, k, codebook, total_warps));
            return;
        }
#endif
        kernel<<<grid, dim3(kThreads), 0, s>>>(j, device_jobs, count, n, k, codebook, total_warps);
        AFF_GPU_CHECK(hipGetLastError());
    };
    switch (batch) {
        case 1: go(moe_gemv_kernel<1>); break;
        case 2: go(moe_gemv_kernel<2>); break;
        case 3: go(moe_gemv_kernel<3>); break;
        default: go(moe_gemv_kernel<4>); break;
    }
}

}  // namespace

void moe_gemv_tuned(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook,
                    const MoeGemvTuning& t, void* stream) {
    launch_moe_gemv(jobs, nullptr, count, n, k, batch, codebook, t, stream);
}

void moe_gemv_device_jobs(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook,
                          void* stream) {
    launch_moe_gemv(nullptr, jobs, count, n, k, batch, codebook, kMoeGemvDefault, stream);
}

void moe_gemv(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook, void* stream) {
    moe_gemv_tuned(jobs, count, n, k, batch, codebook, kMoeGemvDefault, stream);
}

void tq2875_dequantize(const uint8_t* w, int rows, int k, const uint16_t* codebook, float* out, void* stream) {
    if (k <= 0 || k % 1024 != 0 || k > kMaxK) throw_argument("tq2875_dequantize", "k must be a multiple of 1024 up to 4096");
    if (rows <= 0) throw_argument("tq2875_dequantize", "rows must be positive");
    const size_t pairs = static_cast<size_t>(rows) * (k / 4);
    const dim3 grid(static_cast<unsigned>((pairs + kThreads - 1) / kThreads));
    tq2875_dequantize_kernel<<<grid, dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(w, rows, k, codebook, out);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
