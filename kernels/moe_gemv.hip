// Codebook-expert GEMV (declarations and contract in moe_gemv.hpp). Memory-bound on the
// 2.875-bit weights in principle, but on the H200 bound by the shared-memory pipe: every two
// weights cost one 4-byte codebook read at a random address (about 3.5-way bank conflicts
// for 32 random reads), so the design spends that pipe on the codebook as far as it can. A
// block of 128 threads copies the 16 KiB codebook into shared memory once and its 4 warps walk
// work items of 8 rows (or 4; of one matrix, or half each of w1 and w3) with a stride over the
// grid. A warp loads an item's rows with coalesced 16-byte loads into registers, parks them
// byte-swapped in its own shared-memory stage and, while decoding them, already has the next
// item's loads in flight. Decoding: lane l owns steps 4l..4l+3 of every block (weights
// 8l..8l+7), whose windows all lie in the 29 stream bits before e_{4l+3} (format §4): two
// stage words and a funnel shift give all four windows. The block's activations (8 per lane
// and token) are read once per block for all the item's rows, so 8-row items halve what they
// cost the pipe besides the gathers. An item serves up to 4 tokens per decoded weight. No
// data-dependent branch; block scale applied once per block.
#include "kernels/moe_gemv.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"
#include "kernels/gemv_reduce.hpp"
#include "kernels/launch.hpp"
#include "kernels/tq2875_decode.hpp"

#include <algorithm>
#include <atomic>

namespace aff::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kWarpsPerBlock = kThreads / kWarp;
// Blocks per multiprocessor the kernel is compiled for: 4 caps registers at 128; the 3- and
// 4-token kernels need more (they spill at 128) and take 3 (170 registers), as do 8-row items
// (the next item's 8 rows wait in registers; stage and codebook take 63.5 KiB: 3 blocks fit).
__host__ __device__ constexpr int min_blocks(int max_tokens, int rows) { return max_tokens >= 3 || rows > 4 ? 3 : 4; }
constexpr int kMinRows = 4;                // rows per work item: 4 or 8 (MoeGemvTuning::item_rows)
constexpr int kMaxK = 4096;
using dev::tq::kBlockBytes;  // 92 bytes: 256 weights
using dev::tq::kBlockWords;
using dev::tq::kEntries;
using dev::tq::LaneBits;
using dev::pow2_at_least;
constexpr int kMaxRowWords = kMaxK / 256 * kBlockWords;                  // 368
constexpr int kMaxRowChunks = kMaxRowWords / 4;                          // 92 uint4 a row
constexpr int kChunksPerLane = (kMaxRowChunks + kWarp - 1) / kWarp;      // 3

// Everything a launch needs, by value: explicit jobs (count > 0) or the routed layout.
struct Params {
    MoeGemvJob job[kMoeGemvMaxJobs];
    int count = 0;  // explicit jobs; 0: routed
    int batch = 1;
    MoeGemvRouted routed;
    int n = 0, k = 0;
    int total_warps = 0;
};

__device__ inline void load_codebook(const uint16_t* codebook, uint32_t* cb) {
    const uint4* src = reinterpret_cast<const uint4*>(codebook);
    uint4* dst = reinterpret_cast<uint4*>(cb);
    for (int i = static_cast<int>(dev::thread_x()); i < kEntries / 4; i += kThreads) dst[i] = src[i];
}

template <int V>
struct Tokens {
    static constexpr int value = V;
};

// Shared memory of one block (dynamic): the codebook, then each warp's stage of `rows` rows.
__host__ __device__ constexpr size_t shared_bytes(int rows) {
    return 4u * static_cast<size_t>(kEntries + kWarpsPerBlock * rows * kMaxRowWords);
}

// Rows r0 .. r0+RR-1 of an item for M tokens: the item's rows sit byte-swapped in `st`
// (kMaxRowWords words apart); x[b] is token b's input (k floats). acc ends as the warp-wide
// partial sums reduced by the caller.
template <int M, int RR>
__device__ inline void item_products(const uint32_t* st, int r0, const uint32_t* cb,
                                     const float* const (&x)[kMoeGemvMaxBatch], int blocks, const LaneBits& lb,
                                     float (&acc)[pow2_at_least(RR * M)]) {
#pragma unroll
    for (int i = 0; i < pow2_at_least(RR * M); ++i) acc[i] = 0.0f;
    for (int blk = 0; blk < blocks; ++blk) {
        float4 xa[M], xb[M];
#pragma unroll
        for (int b = 0; b < M; ++b) {
            const float4* xr = reinterpret_cast<const float4*>(x[b] + blk * 256) + 2 * dev::lane_id();
            xa[b] = dev::ldg(xr);
            xb[b] = dev::ldg(xr + 1);
        }
#pragma unroll
        for (int r = 0; r < RR; ++r) {
            const uint32_t* words = st + (r0 + r) * kMaxRowWords + blk * kBlockWords;
            uint32_t w0, w1, w2, w3;
            dev::tq::lane_windows(words, lb, w0, w1, w2, w3);
            float e[8];
            dev::tq::entry_to_float2(cb[w0], e[0], e[1]);
            dev::tq::entry_to_float2(cb[w1], e[2], e[3]);
            dev::tq::entry_to_float2(cb[w2], e[4], e[5]);
            dev::tq::entry_to_float2(cb[w3], e[6], e[7]);
            const float s = dev::tq::swapped_scale(words[kBlockWords - 1]);
#pragma unroll
            for (int b = 0; b < M; ++b) {
                const float part = e[0] * xa[b].x + e[1] * xa[b].y + e[2] * xa[b].z + e[3] * xa[b].w +
                                   e[4] * xb[b].x + e[5] * xb[b].y + e[6] * xb[b].z + e[7] * xb[b].w;
                acc[r * M + b] += s * part;
            }
        }
    }
    dev::warp_reduce_scatter<pow2_at_least(RR * M)>(acc);
}

// kMaxM: the most tokens an item serves; kR: rows per item (MoeGemvTuning::item_rows).
template <int kMaxM, int kR>
__global__ void __launch_bounds__(kThreads, min_blocks(kMaxM, kR))
    moe_gemv_kernel(const Params p, const uint16_t* __restrict__ codebook) {
    extern __shared__ uint4 smem[];
    uint32_t* cb = reinterpret_cast<uint32_t*>(smem);
    __shared__ int ids[kMoeGemvMaxPairs];
    __shared__ const uint8_t* table[kMoeGemvMaxExperts];  // the expert table (routed)
    __shared__ const uint8_t* extent[kMoeGemvMaxPairs];    // pair j's expert's extent
    __shared__ int lead_tokens[kMoeGemvMaxPairs];    // 0: another pair decodes this expert
    __shared__ uint32_t lead_pairs[kMoeGemvMaxPairs];  // the pairs it serves, 8 bits each
    dev::launch_dependents();
    const int tid = static_cast<int>(dev::thread_x());
    const int lane = static_cast<int>(dev::lane_id());
    const int warp = tid / kWarp;
    const bool routed = p.count == 0;
    const int mats = routed ? p.routed.matrices : 1;
    const int rows_per_mat = kR / mats;
    const int items_per_job = p.n / rows_per_mat;
    const int pairs = routed ? p.routed.tokens * p.routed.top_k : 0;
    const int items = (routed ? pairs : p.count) * items_per_job;
    const int row_chunks = p.k / 256 * kBlockWords / 4;
    const int blocks = p.k / 256;
    const size_t row_bytes = static_cast<size_t>(row_chunks) * 16;

    // Row r of item `it`: matrix r / rows_per_mat, row (it % items_per_job) · rows_per_mat + r % rows_per_mat.
    auto row_ptr = [&](int it, int r) {
        const int job = it / items_per_job;
        const size_t row = static_cast<size_t>(it % items_per_job) * rows_per_mat + r % rows_per_mat;
        const uint8_t* base = routed ? extent[job] + p.routed.offset[r / rows_per_mat] : p.job[job].w;
        return reinterpret_cast<const uint4*>(base + row * row_bytes);
    };
    uint4 buf[kR][kChunksPerLane];
    auto load_item = [&](int it) {
#pragma unroll
        for (int r = 0; r < kR; ++r) {
            const uint4* w = row_ptr(it, r);
#pragma unroll
            for (int i = 0; i < kChunksPerLane; ++i) {
                const int c = lane + i * kWarp;
                if (c < row_chunks) buf[r][i] = dev::load_stream(w + c);
            }
        }
    };
    auto valid_from = [&](int it) {
        if (routed)
            while (it < items && lead_tokens[it / items_per_job] == 0) it += p.total_warps;
        return it;
    };

    int item = static_cast<int>(dev::block_x()) * kWarpsPerBlock + warp;
    if (!routed && item < items) load_item(item);  // explicit weights may load before the wait
    load_codebook(codebook, cb);
    if (routed) {
        // No kernel writes the table (the host does, between launches): read before the wait.
        for (int e = tid; e < p.routed.experts_count; e += kThreads) table[e] = p.routed.experts[e];
        dev::wait_prerequisites();  // the ids come from the previous kernel
        if (tid < pairs) ids[tid] = p.routed.ids[tid];
    }
    dev::sync_block();
    if (routed && tid < pairs) {
        // The first pair naming an expert decodes it, for every token that chose it.
        int lead = 1;
        for (int j = 0; j < tid; ++j) lead &= ids[j] != ids[tid];
        int m = 0;
        uint32_t list = 0;
        for (int j = tid; j < pairs; ++j)
            if (ids[j] == ids[tid] && m < kMoeGemvMaxBatch) list |= static_cast<uint32_t>(j) << (8 * m++);
        lead_tokens[tid] = lead ? m : 0;
        lead_pairs[tid] = list;
        extent[tid] = table[ids[tid]];
    }
    dev::sync_block();
    dev::wait_prerequisites();  // x may come from the previous kernel; y may still be read by it
    if (routed) {
        item = valid_from(item);
        if (item < items) load_item(item);
    }

    const LaneBits lb = dev::tq::lane_bits(lane);
    uint32_t* st = cb + kEntries + warp * kR * kMaxRowWords;
    while (item < items) {
        dev::sync_warp();  // every lane is done with the stage
#pragma unroll
        for (int r = 0; r < kR; ++r)
#pragma unroll
            for (int i = 0; i < kChunksPerLane; ++i) {
                const int c = lane + i * kWarp;
                if (c < row_chunks) {
                    const uint4 v = buf[r][i];
                    *reinterpret_cast<uint4*>(st + r * kMaxRowWords + 4 * c) =
                        uint4{dev::tq::bswap32(v.x), dev::tq::bswap32(v.y), dev::tq::bswap32(v.z),
                              dev::tq::bswap32(v.w)};
                }
            }
        dev::sync_warp();
        const int job = item / items_per_job;
        const int row0 = (item % items_per_job) * rows_per_mat;
        const int m = routed ? lead_tokens[job] : p.batch;
        const uint32_t list = routed ? lead_pairs[job] : 0x03020100u;
        const int next = valid_from(item + p.total_warps);
        if (next < items) load_item(next);

        // Token b's input; its output lies y_offset(b) floats past the matrix's y at row 0.
        const float* x[kMoeGemvMaxBatch];
        const float* x_base = routed && p.routed.rotated && p.routed.rotated[ids[job]] ? p.routed.x_rotated : p.routed.x;
#pragma unroll
        for (int b = 0; b < kMoeGemvMaxBatch; ++b) {
            const int pr = static_cast<int>((list >> (8 * b)) & 0xffu);
            x[b] = routed ? x_base + (pr / p.routed.top_k) * p.routed.x_token_stride +
                                (pr % p.routed.top_k) * p.routed.x_slot_stride
                          : p.job[job].x + static_cast<size_t>(b) * p.k;
        }
        auto y_offset = [&](int b) {
            return static_cast<size_t>(routed ? static_cast<int>((list >> (8 * b)) & 0xffu) : b) * p.n;
        };
        // Rows r0 .. r0+RR-1 for M tokens, products and stores.
        auto run = [&](auto tokens, auto rows, int r0) {
            constexpr int M = decltype(tokens)::value, RR = decltype(rows)::value;
            float acc[pow2_at_least(RR * M)];
            item_products<M, RR>(st, r0, cb, x, blocks, lb, acc);
            constexpr int kSpread = kWarp / pow2_at_least(RR * M);
            const int v = lane / kSpread;
            if (lane % kSpread == 0 && v < RR * M) {
                const int r = r0 + v / M, b = v % M;
                float* y = routed ? p.routed.y[r / rows_per_mat] : p.job[job].y;
                y[y_offset(b) + row0 + r % rows_per_mat] = acc[0];
            }
        };
        // Three or four tokens over 8 rows: two passes of 4 rows (their sums would not fit the
        // registers beside the next item's weights).
        constexpr int kWide = kR > 4 ? 4 : kR;
        if constexpr (kMaxM >= 4) {
            if (m == 4)
                for (int r0 = 0; r0 < kR; r0 += kWide) run(Tokens<4>{}, Tokens<kWide>{}, r0);
        }
        if constexpr (kMaxM >= 3) {
            if (m == 3)
                for (int r0 = 0; r0 < kR; r0 += kWide) run(Tokens<3>{}, Tokens<kWide>{}, r0);
        }
        if constexpr (kMaxM >= 2) {
            if (m == 2) run(Tokens<2>{}, Tokens<kR>{}, 0);
        }
        if (m == 1) run(Tokens<1>{}, Tokens<kR>{}, 0);
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
    const dev::tq::PairBits b = dev::tq::pair_bits(p);
    uint32_t w0, w1;
    dev::tq::pair_windows(words[b.word > 0 ? b.word - 1 : 0], words[b.word], b, w0, w1);
    const float s = dev::tq::block_scale(words[kBlockWords - 1]);
    float e[4];
    dev::tq::entry_to_float2(cb[w0], e[0], e[1]);
    dev::tq::entry_to_float2(cb[w1], e[2], e[3]);
    float* o = out + block * 256 + 4 * p;
    for (int j = 0; j < 4; ++j) o[j] = s * e[j];
}

void check_shape(const char* what, int n, int k) {
    if (k <= 0 || k % 1024 != 0 || k > kMaxK) throw_argument(what, "k must be a multiple of 1024 up to 4096");
    if (n <= 0 || n % kMinRows != 0) throw_argument(what, "n must be a positive multiple of 4");
}

// Rows per item the launch takes: 8 where asked, the shape allows (n % 8 with one matrix) and
// the 63.5 KiB of shared memory can be opted into (NVIDIA), else 4.
int item_rows(const MoeGemvTuning& t, int n, int matrices) {
#if defined(AFF_GPU_IS_CUDA)
    if (t.item_rows == 8 && (matrices == 2 || n % 8 == 0)) return 8;
#else
    (void)n;
    (void)matrices;
#endif
    if (t.item_rows != 4 && t.item_rows != 8) throw_argument("moe_gemv", "item_rows must be 4 or 8");
    return 4;
}

// One launch of moe_gemv_kernel<M, R> (one opt-in flag per instantiation and device).
template <int M, int R>
void launch_kernel(const Params& p, dim3 grid, const uint16_t* codebook, const MoeGemvTuning& t, hipStream_t s) {
    constexpr size_t bytes = shared_bytes(R);
#if defined(AFF_GPU_IS_CUDA)
    if constexpr (bytes > 48 * 1024) {
        // Over the default 48 KiB (the 8-row stage): the opt-in is per function and device.
        static std::atomic<unsigned long long> attribute_set{0};
        int dev = 0;
        AFF_GPU_CHECK(cudaGetDevice(&dev));
        const unsigned long long bit = 1ull << (dev & 63);
        if (!(attribute_set.load(std::memory_order_relaxed) & bit)) {
            AFF_GPU_CHECK(cudaFuncSetAttribute(moe_gemv_kernel<M, R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(bytes)));
            attribute_set.fetch_or(bit);
        }
    }
#endif
    launch_gpu_kernel(moe_gemv_kernel<M, R>, grid, dim3(kThreads), bytes, s, t.dependent_launch, p, codebook);
}

void launch(Params& p, int rows, int max_tokens, const uint16_t* codebook, const MoeGemvTuning& t, void* stream) {
    if (t.target_blocks < 1) throw_argument("moe_gemv", "target_blocks must be positive");
    const int mats = p.count == 0 ? p.routed.matrices : 1;
    const int items = (p.count == 0 ? p.routed.tokens * p.routed.top_k : p.count) * (p.n / (rows / mats));
    const int target = std::max(1, t.target_blocks * min_blocks(max_tokens, rows) / min_blocks(1, kMinRows));
    const int blocks = std::max(1, std::min(target, (items + kWarpsPerBlock - 1) / kWarpsPerBlock));
    const dim3 grid(static_cast<unsigned>(blocks));
    p.total_warps = blocks * kWarpsPerBlock;
    const auto s = static_cast<hipStream_t>(stream);
    auto pick = [&](auto m) {
        constexpr int M = decltype(m)::value;
        if (rows == 8) launch_kernel<M, 8>(p, grid, codebook, t, s);
        else launch_kernel<M, 4>(p, grid, codebook, t, s);
    };
    switch (max_tokens) {
        case 1: pick(Tokens<1>{}); break;
        case 2: pick(Tokens<2>{}); break;
        case 3: pick(Tokens<3>{}); break;
        default: pick(Tokens<4>{}); break;
    }
}

}  // namespace

void moe_gemv_tuned(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook,
                    const MoeGemvTuning& t, void* stream) {
    check_shape("moe_gemv", n, k);
    if (count < 1 || count > kMoeGemvMaxJobs) throw_argument("moe_gemv", "job count must be 1..16");
    if (batch < 1 || batch > kMoeGemvMaxBatch) throw_argument("moe_gemv", "batch must be 1..4");
    Params p;
    for (int i = 0; i < count; ++i) p.job[i] = jobs[i];
    p.count = count;
    p.batch = batch;
    p.n = n;
    p.k = k;
    launch(p, item_rows(t, n, 1), batch, codebook, t, stream);
}

void moe_gemv(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook, void* stream) {
    moe_gemv_tuned(jobs, count, n, k, batch, codebook, kMoeGemvDefault, stream);
}

void moe_gemv_routed(const MoeGemvRouted& r, int n, int k, const uint16_t* codebook, const MoeGemvTuning& t,
                     void* stream) {
    check_shape("moe_gemv_routed", n, k);
    if (r.tokens < 1 || r.tokens > kMoeGemvMaxBatch) throw_argument("moe_gemv_routed", "tokens must be 1..4");
    if (r.top_k < 1 || r.tokens * r.top_k > kMoeGemvMaxPairs)
        throw_argument("moe_gemv_routed", "tokens * top_k must be 1..64");
    if (r.matrices != 1 && r.matrices != 2) throw_argument("moe_gemv_routed", "matrices must be 1 or 2");
    if (!r.ids || !r.x || !r.experts || !r.y[0] || (r.matrices == 2 && !r.y[1]))
        throw_argument("moe_gemv_routed", "null pointer");
    if (r.experts_count < 1 || r.experts_count > kMoeGemvMaxExperts)
        throw_argument("moe_gemv_routed", "experts_count must be 1..256");
    if (r.offset[0] % 16 != 0 || r.offset[1] % 16 != 0)
        throw_argument("moe_gemv_routed", "matrix offsets in an extent must be multiples of 16");
    if (r.rotated && (r.matrices != 1 || !r.x_rotated))
        throw_argument("moe_gemv_routed", "rotated experts need matrices == 1 and x_rotated");
    Params p;
    p.count = 0;
    p.routed = r;
    p.n = n;
    p.k = k;
    launch(p, item_rows(t, n, r.matrices), r.tokens, codebook, t, stream);
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
