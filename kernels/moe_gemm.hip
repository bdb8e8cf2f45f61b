// Routed-expert GEMM for prefill (declarations and contract in moe_gemm.hpp).
// moe_group: one block of 1024 threads counts jobs per expert in shared memory, one thread
// turns the counts into starts and a tile list (an expert's jobs in tiles of 64), then every
// job is scattered to its expert's group. moe_gemm: the grid is (n / 128, most tiles there can
// be); a block whose tile index is past the real count returns at once, so the host never
// needs the counts. A block of 256 threads (8 warps: 2 along jobs × 4 along weight rows) owns
// one tile of ≤ 64 jobs of one expert and 128 of its weight rows; per k-step of 64 it gathers
// its jobs' activations (fp32 → bf16) and decodes the weights with the codebook held in shared
// memory (kernels/tq2875_decode.hpp: each thread 8 step pairs = 32 weights of one row,
// s · c rounded to bf16), then each warp multiplies its 32 × 32 part on the tensor cores
// (kernels/mma_tile.hpp). The next step's activations and index words are loaded into
// registers before the current step's products.
#include "kernels/moe_gemm.hpp"

#include "kernels/check.hpp"
#include "kernels/mma_tile.hpp"
#include "kernels/tq2875_decode.hpp"

namespace aff::gpu {
namespace {

constexpr int kGroupThreads = 1024;
constexpr int kThreads = 256;
constexpr int kBM = kMoeGemmTileM;  // jobs a tile
constexpr int kBN = 128;            // weight rows a tile
constexpr int kBK = 64;
constexpr int kLd = kBK + dev::kTilePad;
constexpr int kMT = 2, kNT = 4;                  // warp tile 32 × 32
constexpr int kXLoads = kBM * kBK / 4 / kThreads;  // float4 a thread a step: 4
constexpr int kPairs = 8;                          // step pairs a thread decodes a step

// Scratch layout, in int32: counts[E], starts[E], tile_count[4], perm[jobs], then three arrays
// of max_tiles: tile expert, first sorted position, job count.
struct Layout {
    int counts, starts, tile_count, perm, tile_expert, tile_start, tile_rows, total;
};
__host__ __device__ inline int max_tiles(int jobs, int experts) { return jobs / kBM + experts + 1; }
__host__ __device__ inline Layout layout(int jobs, int experts) {
    Layout l;
    const int t = max_tiles(jobs, experts);
    auto up4 = [](int v) { return (v + 3) / 4 * 4; };
    l.counts = 0;
    l.starts = up4(experts);
    l.tile_count = l.starts + up4(experts);
    l.perm = l.tile_count + 4;
    l.tile_expert = l.perm + up4(jobs);
    l.tile_start = l.tile_expert + up4(t);
    l.tile_rows = l.tile_start + up4(t);
    l.total = l.tile_rows + up4(t);
    return l;
}

__global__ void __launch_bounds__(kGroupThreads)
    moe_group_kernel(const int32_t* __restrict__ ids, int jobs, int experts, int32_t* __restrict__ scratch) {
    __shared__ unsigned count[kMoeGemmMaxExperts], cursor[kMoeGemmMaxExperts], start[kMoeGemmMaxExperts],
        first_tile[kMoeGemmMaxExperts];
    const Layout L = layout(jobs, experts);
    const int tid = static_cast<int>(dev::thread_x());
    for (int e = tid; e < experts; e += kGroupThreads) count[e] = cursor[e] = 0;
    dev::sync_block();
    for (int j = tid; j < jobs; j += kGroupThreads) dev::atomic_add(&count[ids[j]], 1u);
    dev::sync_block();
    if (tid == 0) {
        unsigned at = 0, tiles = 0;
        for (int e = 0; e < experts; ++e) {
            start[e] = at;
            first_tile[e] = tiles;
            at += count[e];
            tiles += (count[e] + kBM - 1) / kBM;
        }
        scratch[L.tile_count] = static_cast<int32_t>(tiles);
    }
    dev::sync_block();
    for (int e = tid; e < experts; e += kGroupThreads) {
        scratch[L.counts + e] = static_cast<int32_t>(count[e]);
        scratch[L.starts + e] = static_cast<int32_t>(start[e]);
        const unsigned tiles = (count[e] + kBM - 1) / kBM;
        for (unsigned i = 0; i < tiles; ++i) {
            const unsigned t = first_tile[e] + i;
            scratch[L.tile_expert + t] = e;
            scratch[L.tile_start + t] = static_cast<int32_t>(start[e] + i * kBM);
            scratch[L.tile_rows + t] = static_cast<int32_t>(count[e] - i * kBM < unsigned(kBM) ? count[e] - i * kBM : kBM);
        }
    }
    for (int j = tid; j < jobs; j += kGroupThreads) {
        const int e = ids[j];
        scratch[L.perm + start[e] + dev::atomic_add(&cursor[e], 1u)] = j;
    }
}

__global__ void __launch_bounds__(kThreads)
    moe_gemm_kernel(const uint8_t* const* __restrict__ table, size_t offset, int n, int k,
                    const int32_t* __restrict__ scratch, int jobs, int experts, const float* __restrict__ x,
                    int x_group, float* __restrict__ y, const uint16_t* __restrict__ codebook) {
    __shared__ __attribute__((aligned(16))) uint16_t As[kBM * kLd];
    __shared__ __attribute__((aligned(16))) uint16_t Bs[kBN * kLd];
    __shared__ __attribute__((aligned(16))) uint32_t cb[dev::tq::kEntries];
    __shared__ int job_of[kBM];
    const Layout L = layout(jobs, experts);
    const int tile = static_cast<int>(dev::block_y());
    if (tile >= scratch[L.tile_count]) return;
    const int tid = static_cast<int>(dev::thread_x());
    const int bn = static_cast<int>(dev::block_x()) * kBN;
    const int expert = scratch[L.tile_expert + tile];
    const int first = scratch[L.tile_start + tile];
    const int rows = scratch[L.tile_rows + tile];
    if (tid < kBM) job_of[tid] = tid < rows ? scratch[L.perm + first + tid] : -1;
    {
        const uint4* src = reinterpret_cast<const uint4*>(codebook);
        uint4* dst = reinterpret_cast<uint4*>(cb);
        for (int i = tid; i < dev::tq::kEntries / 4; i += kThreads) dst[i] = src[i];
    }
    dev::sync_block();

    const int warp = tid / kWarp;
    const int wm = (warp / 4) * (kMT * 16), wn = (warp % 4) * (kNT * 8);
    const int blocks_per_row = k / 256;
    // This thread's weight row and its 8 step pairs of the quarter block a k-step covers.
    const int wrow = tid / 2, half = tid % 2;
    const uint32_t* row_words = reinterpret_cast<const uint32_t*>(table[expert] + offset) +
                                static_cast<size_t>(bn + wrow) * blocks_per_row * dev::tq::kBlockWords;

    float4 xr[kXLoads];
    uint32_t lo[kPairs], hi[kPairs], sw;
    auto load = [&](int kb) {
#pragma unroll
        for (int i = 0; i < kXLoads; ++i) {
            const int idx = tid + i * kThreads, r = idx / (kBK / 4), c4 = idx % (kBK / 4);
            const int j = job_of[r];
            if (j >= 0)
                xr[i] = dev::ldg(reinterpret_cast<const float4*>(x + static_cast<size_t>(j / x_group) * k + kb) + c4);
            else
                xr[i] = float4{0.0f, 0.0f, 0.0f, 0.0f};
        }
        const uint32_t* words = row_words + (kb / 256) * dev::tq::kBlockWords;
        const int p0 = ((kb / kBK) % 4) * 16 + half * kPairs;
#pragma unroll
        for (int i = 0; i < kPairs; ++i) {
            const dev::tq::PairBits b = dev::tq::pair_bits(p0 + i);
            hi[i] = words[b.word];
            lo[i] = words[b.word > 0 ? b.word - 1 : 0];
        }
        sw = words[dev::tq::kBlockWords - 1];
    };
    auto store = [&](int kb) {
#pragma unroll
        for (int i = 0; i < kXLoads; ++i) {
            const int idx = tid + i * kThreads, r = idx / (kBK / 4), c4 = idx % (kBK / 4);
            uint32_t* dst = reinterpret_cast<uint32_t*>(As + r * kLd + c4 * 4);
            dst[0] = dev::pack_bf16x2(xr[i].x, xr[i].y);
            dst[1] = dev::pack_bf16x2(xr[i].z, xr[i].w);
        }
        const float s = dev::tq::block_scale(sw);
        const int p0 = ((kb / kBK) % 4) * 16 + half * kPairs;
        uint32_t out[2 * kPairs];
#pragma unroll
        for (int i = 0; i < kPairs; ++i) {
            uint32_t w0, w1;
            dev::tq::pair_windows(lo[i], hi[i], dev::tq::pair_bits(p0 + i), w0, w1);
            float e0, e1, e2, e3;
            dev::tq::entry_to_float2(cb[w0], e0, e1);
            dev::tq::entry_to_float2(cb[w1], e2, e3);
            out[2 * i] = dev::pack_bf16x2(s * e0, s * e1);
            out[2 * i + 1] = dev::pack_bf16x2(s * e2, s * e3);
        }
        uint4* dst = reinterpret_cast<uint4*>(Bs + wrow * kLd + half * kPairs * 4);
#pragma unroll
        for (int q = 0; q < kPairs / 2; ++q) dst[q] = uint4{out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]};
    };

    float acc[kMT][kNT][4];
#pragma unroll
    for (int a = 0; a < kMT; ++a)
#pragma unroll
        for (int b = 0; b < kNT; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

    load(0);
    for (int kb = 0; kb < k; kb += kBK) {
        store(kb);
        dev::sync_block();
        if (kb + kBK < k) load(kb + kBK);
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 16) dev::warp_mma_k16<kMT, kNT>(As, kLd, wm, Bs, kLd, wn, kk, acc);
        dev::sync_block();
    }

    const int g = static_cast<int>(dev::lane_id()) >> 2, t = static_cast<int>(dev::lane_id()) & 3;
#pragma unroll
    for (int a = 0; a < kMT; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = job_of[wm + 16 * a + g + 8 * h];
            if (j < 0) continue;
#pragma unroll
            for (int b = 0; b < kNT; ++b) {
                const int col = bn + wn + 8 * b + 2 * t;
                *reinterpret_cast<float2*>(y + static_cast<size_t>(j) * n + col) =
                    float2{acc[a][b][2 * h], acc[a][b][2 * h + 1]};
            }
        }
}

}  // namespace

std::size_t moe_group_bytes(int jobs, int experts) {
    return static_cast<std::size_t>(layout(jobs, experts).total) * 4;
}

const int32_t* moe_group_counts(const void* scratch) {
    return static_cast<const int32_t*>(scratch) + layout(1, 1).counts;  // counts lead the layout whatever its sizes
}

bool moe_gemm_takes(int n, int k, int experts) {
    return k > 0 && k % 256 == 0 && n > 0 && n % kBN == 0 && experts >= 1 && experts <= kMoeGemmMaxExperts;
}

void moe_group(const int32_t* ids, int jobs, int experts, void* scratch, void* stream) {
    if (experts < 1 || experts > kMoeGemmMaxExperts) throw_argument("moe_group", "experts must be 1..1024");
    if (jobs < 1) throw_argument("moe_group", "jobs must be positive");
    moe_group_kernel<<<dim3(1), dim3(kGroupThreads), 0, static_cast<hipStream_t>(stream)>>>(
        ids, jobs, experts, static_cast<int32_t*>(scratch));
    AFF_GPU_CHECK(hipGetLastError());
}

void moe_gemm(const uint8_t* const* table, std::size_t offset, int n, int k, const void* scratch, int jobs,
              int experts, const float* x, int x_group, float* y, const uint16_t* codebook, void* stream) {
    if (!moe_gemm_takes(n, k, experts)) throw_argument("moe_gemm", "needs k % 256 == 0, n % 128 == 0, 1..1024 experts");
    if (jobs < 1 || x_group < 1) throw_argument("moe_gemm", "jobs and x_group must be positive");
    if (!table) throw_argument("moe_gemm", "null expert table");
    if (offset % 4 != 0) throw_argument("moe_gemm", "the matrix offset must be a multiple of 4");
    const int tiles = max_tiles(jobs, experts);
    if (tiles > 65535) throw_argument("moe_gemm", "too many jobs for one launch");
    const dim3 grid(static_cast<unsigned>(n / kBN), static_cast<unsigned>(tiles));
    moe_gemm_kernel<<<grid, dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        table, offset, n, k, static_cast<const int32_t*>(scratch), jobs, experts, x, x_group, y, codebook);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
