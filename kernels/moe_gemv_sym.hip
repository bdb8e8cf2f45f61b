// Codebook-expert GEMV for sign-structured codebooks (declarations in moe_gemv.hpp; the
// structure is libaff/quant/codebook_structure.hpp). Why a second kernel: the generic one
// (moe_gemv.hip) is capped by shared-memory bank conflicts of its codebook gathers (32 random
// 4-byte reads cost 3.5 wavefronts). A structured codebook's base table (4096 >> shift pairs)
// is small enough to keep 32 times in shared memory, copy l in bank l (word b·32 + l), so lane
// l's gathers never conflict; the sign flips (and, for shift 3, the swap) cost a few integer
// operations. The products run on the tensor cores (mma.sync m16n8k16, fp16 in, fp32
// accumulate): a codebook entry is exactly one fp16 pair of the A fragment, the activations
// are the B fragment rounded to fp16 (tokens = the 8 columns, up to 4 used).
//
// Shape: one block per multiprocessor (the replicated table is per block), up to 12 warps,
// fewer when the launch has few items, so all multiprocessors work. A
// warp's work item is 16 rows of one matrix; lane (g, t) = (lane / 4, lane % 4) holds rows g
// and g + 8 and, in every 256-weight block, the quarter t: steps 32t .. 32t+31, whose bits lie
// in the 192 stream bits from 180t − 12 (the window's 12-bit history included). The item's
// rows stream through a per-warp shared stage in chunks of 4 blocks (16-byte loads, coalesced;
// the next chunk's loads are in flight while this one is decoded). Per block: 16 mma.sync over
// the block's 256 columns for the 16 rows, then the fp32 result is scaled by each row's bf16
// block scale (once per block, as the format defines) and added to the row's sum.
// NVIDIA only (sm_80+ for mma.sync): AMD keeps the generic kernel (64 KiB of LDS holds the
// table or the stages, not both).
#include "kernels/moe_gemv.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

#include <algorithm>
#include <atomic>

namespace aff::gpu {

#if defined(AFF_GPU_IS_CUDA)
namespace {

// Warps a block (= a multiprocessor): 12, so a thread keeps 168 registers (at 14 or 16 warps,
// 128 registers, it spilled and ran slower on the H200: tests/bench/RESULTS.md).
template <int S>
__host__ __device__ constexpr int warps_for() { return 12; }
constexpr int kRows = 16;                       // rows per work item (the mma's M)
constexpr int kBlockBytes = 92;
constexpr int kChunkBlocks = 4;                 // 368 bytes a row: a multiple of 16
constexpr int kChunk16 = kChunkBlocks * kBlockBytes / 16;           // 23 uint4 a row
constexpr int kLoads = (kRows * kChunk16 + kWarp - 1) / kWarp;      // 12 a lane
// Stage row stride in words: ≡ 4 (mod 32) and a multiple of 4. Lane (g, t) reads word
// 4g + (180t − 12) / 32 + j (mod 32) of its row; the quarter starts −1, 5, 10, 16 fall in the
// four residues mod 4, so the 32 lanes hit 32 banks.
constexpr int kStageRow = 100;
constexpr int kStageWords = 4 + kRows * kStageRow;  // 4 guard words: lane t = 0 reads word −1
constexpr int kMaxK = 4096;

template <int S>
__host__ __device__ constexpr int table_words() { return kWarp * (4096 >> S); }
template <int S>
constexpr size_t shared_bytes(int warps = warps_for<S>()) {
    return (static_cast<size_t>(table_words<S>()) + static_cast<size_t>(warps) * kStageWords) * 4;
}

struct Params {
    MoeGemvJob job[kMoeGemvMaxJobs];
    int count = 0;  // explicit jobs; 0: routed
    int batch = 1;
    MoeGemvRouted routed;
    int n = 0, k = 0;
    unsigned long long expert_bytes = 0;
    int total_warps = 0;
};

__device__ inline uint32_t bswap32(uint32_t u) { return __byte_perm(u, 0u, 0x0123); }

// The 32 bits of a lane's 192-bit quarter stream R (most significant bit first) starting at
// bit P; P may be negative (bits before the stream read as zero) and bits past 191 are zero.
template <int P>
__device__ inline uint32_t bits32(const uint32_t (&R)[6]) {
    if constexpr (P < 0) {
        return R[0] >> (-P);
    } else if constexpr (P % 32 == 0) {
        return R[P / 32];
    } else if constexpr (P / 32 >= 5) {
        return R[5] << (P % 32);
    } else {
        return __funnelshift_l(R[P / 32 + 1], R[P / 32], P % 32);
    }
}

// Fresh-bit end of a lane's step i (0..31) inside its quarter stream (format §4: K =
// 6,5,6,6,5,6,5,6, 45 bits an octet), shifted by the 12-bit history at the stream's start.
__host__ __device__ constexpr int step_end(int i) {
    constexpr int cum[8] = {6, 11, 17, 23, 28, 34, 39, 45};
    return 45 * (i / 8) + cum[i % 8];
}

// The codebook entry of the lane's step I: window = stream bits [E, E + 12) (E = step_end(I),
// bit E + 11 is the window's bit 0); base index = window >> S at word (index · 32 + lane).
template <int S, int I>
__device__ inline uint32_t entry(const uint32_t (&R)[6], const uint32_t* table, uint32_t lane) {
    constexpr int E = step_end(I);
    // Window bit S at bit 5 of the value: the base index times 32 (the words of one base pair).
    const uint32_t at = (bits32<E + 11 - S - 26>(R) & ((0xfffu >> S) << 5)) | lane;
    uint32_t e = table[at];
    if constexpr (S == 3) {
        // Window bit 2 (stream bit E + 9) at bit 4: rotate by 16 (swap c0, c1) when set.
        const uint32_t rot = bits32<E + 9 - 27>(R) & 16u;
        e = __funnelshift_l(e, e, rot);
    }
    // Window bit 0 (stream bit E + 11) flips c0's sign (bit 15), bit 1 (E + 10) c1's (bit 31).
    e ^= bits32<E + 11 - 16>(R) & 0x8000u;
    e ^= bits32<E + 10>(R) & 0x80000000u;
    return e;
}

__device__ inline uint32_t half2_bits(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ inline void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                 uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // never launched there: moe_gemv_structured_supported needs sm_90
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// The block scale from the byte-swapped word 22 (bf16 in bytes 90..91): float bits b91 b90 0 0.
__device__ inline float swapped_scale(uint32_t v) { return __uint_as_float(__byte_perm(v, 0u, 0x0144)); }

// The block's 16 mma.sync over steps 2j, 2j+1 (j = J..15) of rows g (R0) and g + 8 (R1); xv:
// this lane's 64 activations of the block (4 a step pair). Even and odd j accumulate apart
// (two chains of 8 instead of one of 16: the mma latency was the warp's critical path).
template <int S, int J>
__device__ inline void block_mmas(float (&d)[2][4], const uint32_t (&R0)[6], const uint32_t (&R1)[6],
                                  const uint32_t* table, uint32_t lane, const float4 (&xv)[16]) {
    if constexpr (J < 16) {
        const uint32_t b0 = half2_bits(xv[J].x, xv[J].y), b1 = half2_bits(xv[J].z, xv[J].w);
        const uint32_t a0 = entry<S, 2 * J>(R0, table, lane), a1 = entry<S, 2 * J>(R1, table, lane);
        const uint32_t a2 = entry<S, 2 * J + 1>(R0, table, lane), a3 = entry<S, 2 * J + 1>(R1, table, lane);
        mma_16816(d[J & 1], a0, a1, a2, a3, b0, b1);
        block_mmas<S, J + 1>(d, R0, R1, table, lane, xv);
    }
}

// A lane's quarter stream of one row-block from the stage: words (180t − 12) / 32 .. + 6
// (byte-swapped, so stream order), realigned so bit 0 is stream bit 180t − 12.
__device__ inline void quarter(const uint32_t* words, uint32_t lo_mask, uint32_t off, uint32_t (&R)[6]) {
    uint32_t W[7];
#pragma unroll
    for (int j = 0; j < 7; ++j) W[j] = words[j];
    W[0] &= lo_mask;
#pragma unroll
    for (int j = 0; j < 6; ++j) R[j] = __funnelshift_l(W[j + 1], W[j], off);
}

template <int S>
__global__ void __launch_bounds__(warps_for<S>() * kWarp, 1) moe_gemv_sym_kernel(const Params p, const uint32_t* __restrict__ base) {
    extern __shared__ uint4 smem[];
    uint32_t* table = reinterpret_cast<uint32_t*>(smem);
    __shared__ int ids[kMoeGemvMaxPairs];
    __shared__ int lead_tokens[kMoeGemvMaxPairs];
    __shared__ uint32_t lead_pairs[kMoeGemvMaxPairs];
    dev::launch_dependents();
    const int tid = static_cast<int>(threadIdx.x);
    const uint32_t lane = tid % kWarp;
    const int warp = tid / kWarp;
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    const int g = static_cast<int>(lane >> 2), t = static_cast<int>(lane & 3);
    const bool routed = p.count == 0;
    const int mats = routed ? p.routed.matrices : 1;
    const int groups = p.n / kRows;
    const int items_per_job = mats * groups;
    const int pairs = routed ? p.routed.tokens * p.routed.top_k : 0;
    const int items = (routed ? pairs : p.count) * items_per_job;
    const int chunks = p.k / (256 * kChunkBlocks);
    const size_t row_bytes = static_cast<size_t>(p.k / 256) * kBlockBytes;
    uint32_t* stage = table + table_words<S>() + warp * kStageWords + 4;

    // The replicated table: word b·32 + l = base pair b (4 copies per 16-byte store).
    for (int i = tid; i < table_words<S>() / 4; i += static_cast<int>(blockDim.x)) {
        const uint32_t v = base[i >> 3];
        smem[i] = uint4{v, v, v, v};
    }
    if (lane < 4) stage[-4 + static_cast<int>(lane)] = 0;  // guard: read by lane t = 0, masked
    dev::wait_prerequisites();  // ids, x come from the previous kernels; y may still be read
    if (routed && tid < pairs) ids[tid] = p.routed.ids[tid];
    __syncthreads();
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
    }
    __syncthreads();

    auto valid_from = [&](int it) {
        if (routed)
            while (it < items && lead_tokens[it / items_per_job] == 0) it += p.total_warps;
        return it;
    };
    // First byte of item `it`'s 16 rows.
    auto item_rows = [&](int it) {
        const int job = it / items_per_job, rem = it % items_per_job;
        const int mat = rem / groups;
        const size_t row0 = static_cast<size_t>(rem % groups) * kRows;
        const uint8_t* w = routed ? p.routed.stack[mat] + static_cast<size_t>(ids[job]) * p.expert_bytes : p.job[job].w;
        return w + row0 * row_bytes;
    };
    uint4 buf[kLoads];
    auto load_chunk = [&](int it, int c) {
        const uint8_t* rows = item_rows(it) + static_cast<size_t>(c) * kChunk16 * 16;
#pragma unroll
        for (int i = 0; i < kLoads; ++i) {
            const int q = static_cast<int>(lane) + i * kWarp;
            if (q < kRows * kChunk16)
                buf[i] = dev::load_stream(reinterpret_cast<const uint4*>(rows + (q / kChunk16) * row_bytes) + q % kChunk16);
        }
    };

    // Lane constants: the quarter's first word in a block, its mask (t = 0 starts before the
    // block: zeros) and the realigning shift.
    const int q_start = 180 * t - 12;
    const int q_word = q_start >> 5;  // −1, 5, 10, 16
    const uint32_t lo_mask = t == 0 ? 0u : ~0u;
    const uint32_t off = static_cast<uint32_t>(q_start - 32 * q_word);

    int item = valid_from(static_cast<int>(blockIdx.x) * warps + warp);
    int c = 0;
    if (item < items) load_chunk(item, 0);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float* x = nullptr;  // this lane's token (g) input, null when g >= the item's tokens
    int m = 0;
    uint32_t list = 0;
    int job = 0, mat = 0, row0 = 0;
    while (item < items) {
        __syncwarp();  // every lane is done with the stage
#pragma unroll
        for (int i = 0; i < kLoads; ++i) {
            const int q = static_cast<int>(lane) + i * kWarp;
            if (q < kRows * kChunk16) {
                const uint4 v = buf[i];
                *reinterpret_cast<uint4*>(stage + (q / kChunk16) * kStageRow + 4 * (q % kChunk16)) =
                    uint4{bswap32(v.x), bswap32(v.y), bswap32(v.z), bswap32(v.w)};
            }
        }
        __syncwarp();
        if (c == 0) {
            job = item / items_per_job;
            const int rem = item % items_per_job;
            mat = rem / groups;
            row0 = (rem % groups) * kRows;
            m = routed ? lead_tokens[job] : p.batch;
            list = routed ? lead_pairs[job] : 0x03020100u;
            x = nullptr;
            if (g < m) {
                if (routed) {
                    const int pr = static_cast<int>((list >> (8 * g)) & 0xffu);
                    const float* xb =
                        p.routed.rotated && p.routed.rotated[ids[job]] ? p.routed.x_rotated : p.routed.x;
                    x = xb + (pr / p.routed.top_k) * p.routed.x_token_stride + (pr % p.routed.top_k) * p.routed.x_slot_stride;
                } else {
                    x = p.job[job].x + static_cast<size_t>(g) * p.k;
                }
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[i] = 0.0f;
        }
        int next = item, next_c = c + 1;
        if (next_c == chunks) {
            next_c = 0;
            next = valid_from(item + p.total_warps);
        }
        if (next < items) load_chunk(next, next_c);

#pragma unroll 1
        for (int b = 0; b < kChunkBlocks; ++b) {
            const int bw = b * (kBlockBytes / 4);
            const uint32_t* r0 = stage + g * kStageRow + bw;
            const uint32_t* r1 = r0 + 8 * kStageRow;
            uint32_t R0[6], R1[6];
            quarter(r0 + q_word, lo_mask, off, R0);
            quarter(r1 + q_word, lo_mask, off, R1);
            const float s0 = swapped_scale(r0[22]), s1 = swapped_scale(r1[22]);
            // All 16 activation loads of the block at once (one latency, not several), and the
            // next block's lines asked into L1 meanwhile; lanes without a token give zeros.
            const int blk = c * kChunkBlocks + b;
            float4 xv[16];
#pragma unroll
            for (int j = 0; j < 16; ++j) xv[j] = float4{0.0f, 0.0f, 0.0f, 0.0f};
            if (x) {
                const float4* xb = reinterpret_cast<const float4*>(x + blk * 256 + 64 * t);
#pragma unroll
                for (int j = 0; j < 16; ++j) xv[j] = __ldg(xb + j);
                if (blk + 1 < p.k / 256) {
                    asm volatile("prefetch.global.L1 [%0];" ::"l"(xb + 64));
                    asm volatile("prefetch.global.L1 [%0];" ::"l"(xb + 72));
                }
            }
            float d[2][4] = {};
            block_mmas<S, 0>(d, R0, R1, table, lane, xv);
            acc[0] += s0 * (d[0][0] + d[1][0]);
            acc[1] += s0 * (d[0][1] + d[1][1]);
            acc[2] += s1 * (d[0][2] + d[1][2]);
            acc[3] += s1 * (d[0][3] + d[1][3]);
        }

        if (c == chunks - 1) {
            // d[0], d[1]: row g, tokens 2t, 2t+1; d[2], d[3]: row g + 8.
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int tok = 2 * t + h;
                if (tok < m) {
                    const size_t pair = routed ? (list >> (8 * tok)) & 0xffu : static_cast<size_t>(tok);
                    float* y = (routed ? p.routed.y[mat] : p.job[job].y) + pair * p.n + row0;
                    y[g] = acc[h];
                    y[g + 8] = acc[2 + h];
                }
            }
        }
        item = next;
        c = next_c;
    }
}

int multiprocessors(int dev) {
    int v = 0;
    AFF_GPU_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
}

template <int S>
void launch_sym(Params& p, int items, const uint32_t* base, const MoeGemvTuning& t, void* stream) {
    // The shared-memory opt-in is per function and device: set once per device (bit dev).
    static std::atomic<unsigned long long> attribute_set{0};
    int dev = 0;
    AFF_GPU_CHECK(cudaGetDevice(&dev));
    const unsigned long long bit = 1ull << (dev & 63);
    if (!(attribute_set.load(std::memory_order_relaxed) & bit)) {
        AFF_GPU_CHECK(cudaFuncSetAttribute(moe_gemv_sym_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared_bytes<S>())));
        attribute_set.fetch_or(bit);
    }
    // One block per multiprocessor (the table is per block) with as few warps as spread the
    // items over all of them: a launch of few items runs on many multiprocessors.
    const int sms = multiprocessors(dev);
    const int warps = std::max(1, std::min(warps_for<S>(), (items + sms - 1) / sms));
    const int blocks = std::max(1, (items + warps - 1) / warps);
    p.total_warps = blocks * warps;
    p.expert_bytes = static_cast<unsigned long long>(p.n) * (p.k / 256) * kBlockBytes;
    const auto s = static_cast<cudaStream_t>(stream);
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(static_cast<unsigned>(warps * kWarp));
    config.dynamicSmemBytes = shared_bytes<S>(warps);
    config.stream = s;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = t.dependent_launch ? 1 : 0;
    AFF_GPU_CHECK(cudaLaunchKernelEx(&config, moe_gemv_sym_kernel<S>, p, base));
}

void launch(Params& p, int items, const MoeGemvCodebook& cb, const MoeGemvTuning& t, void* stream) {
    if (cb.shift == 3) launch_sym<3>(p, items, cb.base, t, stream);
    else launch_sym<2>(p, items, cb.base, t, stream);
}

}  // namespace
#endif

bool moe_gemv_structured_supported(int shift) {
#if defined(AFF_GPU_IS_CUDA)
    if (shift != 2 && shift != 3) return false;
    int dev = 0, optin = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    const size_t need = (shift == 3 ? shared_bytes<3>() : shared_bytes<2>()) + 3 * kMoeGemvMaxPairs * 4;
    return major >= 9 && static_cast<size_t>(optin) >= need;
#else
    (void)shift;
    return false;
#endif
}

namespace {

bool structured(const MoeGemvCodebook& cb) { return cb.shift != 0 && cb.base && moe_gemv_structured_supported(cb.shift); }

void check_codebook(const char* what, const MoeGemvCodebook& cb) {
    if (!cb.values) throw_argument(what, "null codebook");
    if (cb.shift != 0 && cb.shift != 2 && cb.shift != 3) throw_argument(what, "codebook shift must be 0, 2 or 3");
}

}  // namespace

void moe_gemv_tuned(const MoeGemvJob* jobs, int count, int n, int k, int batch, const MoeGemvCodebook& cb,
                    const MoeGemvTuning& t, void* stream) {
    check_codebook("moe_gemv", cb);
    if (!structured(cb)) return moe_gemv_tuned(jobs, count, n, k, batch, cb.values, t, stream);
#if defined(AFF_GPU_IS_CUDA)
    if (k <= 0 || k % 1024 != 0 || k > kMaxK) throw_argument("moe_gemv", "k must be a multiple of 1024 up to 4096");
    if (n <= 0 || n % kRows != 0) throw_argument("moe_gemv", "n must be a positive multiple of 16 (structured codebook)");
    if (count < 1 || count > kMoeGemvMaxJobs) throw_argument("moe_gemv", "job count must be 1..16");
    if (batch < 1 || batch > kMoeGemvMaxBatch) throw_argument("moe_gemv", "batch must be 1..4");
    Params p;
    for (int i = 0; i < count; ++i) p.job[i] = jobs[i];
    p.count = count;
    p.batch = batch;
    p.n = n;
    p.k = k;
    launch(p, count * (n / kRows), cb, t, stream);
#endif
}

void moe_gemv_routed(const MoeGemvRouted& r, int n, int k, const MoeGemvCodebook& cb, const MoeGemvTuning& t,
                     void* stream) {
    check_codebook("moe_gemv_routed", cb);
    if (!structured(cb)) return moe_gemv_routed(r, n, k, cb.values, t, stream);
#if defined(AFF_GPU_IS_CUDA)
    if (k <= 0 || k % 1024 != 0 || k > kMaxK)
        throw_argument("moe_gemv_routed", "k must be a multiple of 1024 up to 4096");
    if (n <= 0 || n % kRows != 0)
        throw_argument("moe_gemv_routed", "n must be a positive multiple of 16 (structured codebook)");
    if (r.tokens < 1 || r.tokens > kMoeGemvMaxBatch) throw_argument("moe_gemv_routed", "tokens must be 1..4");
    if (r.top_k < 1 || r.tokens * r.top_k > kMoeGemvMaxPairs)
        throw_argument("moe_gemv_routed", "tokens * top_k must be 1..64");
    if (r.matrices != 1 && r.matrices != 2) throw_argument("moe_gemv_routed", "matrices must be 1 or 2");
    if (!r.ids || !r.x || !r.stack[0] || !r.y[0] || (r.matrices == 2 && (!r.stack[1] || !r.y[1])))
        throw_argument("moe_gemv_routed", "null pointer");
    if (r.rotated && (r.matrices != 1 || !r.x_rotated))
        throw_argument("moe_gemv_routed", "rotated experts need matrices == 1 and x_rotated");
    Params p;
    p.count = 0;
    p.routed = r;
    p.n = n;
    p.k = k;
    launch(p, r.tokens * r.top_k * r.matrices * (n / kRows), cb, t, stream);
#endif
}

}  // namespace aff::gpu
