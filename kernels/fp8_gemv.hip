// FP8 GEMV kernel (declarations and contract in fp8_gemv.hpp). Memory-bound: every weight
// byte is read once, so the design keeps many 16-byte loads in flight and the activations in
// L1. A block of 256 threads is split into row groups of `tpr` threads (a power of two,
// 32..256, chosen from k so each thread has one or two 16-byte chunks per row); a group owns
// kRows (4 or 8) consecutive rows and its threads split the row's 16-byte chunks. Each thread
// loads the chunk of all its rows before using any, scales its activations by the chunk's
// E8M0 block scale once for all rows, decodes the FP8 bytes in registers and accumulates in
// fp32. The kRows·batch sums are reduced across the warp by a reduce-scatter butterfly (31
// shuffles for 32 values instead of 160), then across the group's warps in shared memory.
// With a dependent launch (NVIDIA sm_90 only; checked on H200) the kernel issues its first
// weight loads before waiting for the previous kernel in the stream, hiding the launch gap.
// A launch may cover several matrices of the same k over the same input (fp8_gemv_multi): the
// blocks are dealt out to the parts in order, and a block computes its part's rows exactly as
// a launch of that part alone would (the row groups and chunk split depend on k only).
// Instantiations: batch 1..4 × kRows {8, 4} with the best FP8 decoder of the target, plus
// batch 1..4 × kRows 8 with the portable decoder on NVIDIA (tested there for AMD's sake).
#include "kernels/fp8_gemv.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"
#include "kernels/gemv_reduce.hpp"
#include "kernels/launch.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
using dev::log2_of;
using dev::pow2_at_least;

// Four FP8 bytes of `u` → four floats. kHw: the hardware pair conversion (sm_89+);
// otherwise each byte's sign and 7 low bits go to a float's bit 31 and bits 20..26, which
// is the value times 2^-120, exact for normals and subnormals.
template <bool kHw>
__device__ inline void decode4(uint32_t u, float (&f)[4]) {
    if constexpr (kHw) {
        dev::e4m3x2_to_float2(u & 0xffffu, f[0], f[1]);
        dev::e4m3x2_to_float2(u >> 16, f[2], f[3]);
    } else {
        f[0] = dev::bits_to_float(((u << 24) & 0x80000000u) | ((u << 20) & 0x07f00000u)) * 0x1p120f;
        f[1] = dev::bits_to_float(((u << 16) & 0x80000000u) | ((u << 12) & 0x07f00000u)) * 0x1p120f;
        f[2] = dev::bits_to_float(((u << 8) & 0x80000000u) | ((u << 4) & 0x07f00000u)) * 0x1p120f;
        f[3] = dev::bits_to_float((u & 0x80000000u) | ((u >> 4) & 0x07f00000u)) * 0x1p120f;
    }
}

// The matrices of a launch (one for fp8_gemv_layout) and the first block of each.
struct Parts {
    const uint8_t* w[kFp8GemvMaxParts];
    const uint8_t* scales[kFp8GemvMaxParts];
    float* y[kFp8GemvMaxParts];
    int n[kFp8GemvMaxParts];
    int ldy[kFp8GemvMaxParts];
    int first_block[kFp8GemvMaxParts];
    int count;
};

template <int B, int kRows, bool kHw>
__global__ void __launch_bounds__(kThreads, 2)
    fp8_gemv_kernel(Parts parts, int k, const float* __restrict__ x, int tpr_log2, Fp8GemvLayout layout) {
    constexpr int V = pow2_at_least(B * kRows);
    __shared__ float red[kThreads / kWarp][V];
    dev::launch_dependents();  // the next kernel may start its own weight loads
    const int tpr = 1 << tpr_log2;
    const int tid = static_cast<int>(dev::thread_x());
    const int group = tid >> tpr_log2;
    const int gt = tid & (tpr - 1);
    const int block = static_cast<int>(dev::block_x());
    const int part = parts.count > 2 && block >= parts.first_block[2] ? 2
                     : parts.count > 1 && block >= parts.first_block[1] ? 1
                                                                         : 0;
    const uint8_t* __restrict__ w = dev::pick(parts.w, part);
    const uint8_t* __restrict__ scales = dev::pick(parts.scales, part);
    float* __restrict__ y = dev::pick(parts.y, part);
    const int n = dev::pick(parts.n, part);
    const int ldy = dev::pick(parts.ldy, part);
    const int row0 = ((block - dev::pick(parts.first_block, part)) * (kThreads >> tpr_log2) + group) * kRows;
    const int chunks = k / 16;
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.0f;

    if (row0 < n) {
        // The row group's input: rows of x group (row0 / group_rows) start x_group_stride apart.
        x += static_cast<long long>(row0 / layout.group_rows) * layout.x_group_stride;
        const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<size_t>(row0) * k);
        const uint8_t* srow = scales + static_cast<size_t>(row0 / 128) * (k / 128);
        const size_t row_step = static_cast<size_t>(chunks);  // uint4s per row
        for (int c = gt; c < chunks; c += tpr) {
            uint4 wv[kRows];
#pragma unroll
            for (int r = 0; r < kRows; ++r) wv[r] = dev::load_stream(wr + r * row_step + c);
            const float s = dev::e8m0_to_float(srow[c >> 3]);
            if (c == gt) dev::wait_prerequisites();  // weights are in flight; x may come from the last kernel
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float xs[B][4];
#pragma unroll
                for (int b = 0; b < B; ++b) {
                    const float4 t = dev::ldg(reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * layout.ldx) + c * 4 + q);
                    xs[b][0] = t.x * s;
                    xs[b][1] = t.y * s;
                    xs[b][2] = t.z * s;
                    xs[b][3] = t.w * s;
                }
#pragma unroll
                for (int r = 0; r < kRows; ++r) {
                    const uint32_t word = q == 0 ? wv[r].x : q == 1 ? wv[r].y : q == 2 ? wv[r].z : wv[r].w;
                    float f[4];
                    decode4<kHw>(word, f);
#pragma unroll
                    for (int b = 0; b < B; ++b)
                        acc[b * kRows + r] += f[0] * xs[b][0] + f[1] * xs[b][1] + f[2] * xs[b][2] + f[3] * xs[b][3];
                }
            }
        }
    }

    dev::wait_prerequisites();  // before y is written (also for threads that had no chunk)
    dev::warp_reduce_scatter<V>(acc);
    constexpr int kSpread = kWarp / V;  // lanes holding the same value index
    const unsigned lane = dev::lane_id();
    const int warp = tid / kWarp;
    if (lane % kSpread == 0) red[warp][lane / kSpread] = acc[0];
    dev::sync_block();
    const int warps_per_group = tpr / kWarp;
    if (gt < B * kRows && row0 < n) {
        float sum = 0.0f;
        for (int i = 0; i < warps_per_group; ++i) sum += red[group * warps_per_group + i][gt];
        const int b = gt / kRows, r = gt % kRows;
        y[static_cast<size_t>(b) * ldy + row0 + r] = sum;
    }
}

template <int kRows, bool kHw>
void launch_fp8_gemv(Parts parts, int k, const float* x, int batch, const Fp8GemvLayout& layout, bool dependent,
                     hipStream_t stream) {
    const int chunks = k / 16;
    int tpr = kWarp;
    while (tpr * 2 <= chunks && tpr < kThreads) tpr *= 2;
    const int rows_per_block = (kThreads / tpr) * kRows;
    int blocks = 0;
    for (int i = 0; i < parts.count; ++i) {
        parts.first_block[i] = blocks;
        blocks += (parts.n[i] + rows_per_block - 1) / rows_per_block;
    }
    const dim3 grid(static_cast<unsigned>(blocks));
    const int tpr_log2 = log2_of(tpr);
    auto go = [&](auto kernel) {
        launch_gpu_kernel(kernel, grid, dim3(kThreads), 0, stream, dependent, parts, k, x, tpr_log2, layout);
    };
    switch (batch) {
        case 1: go(fp8_gemv_kernel<1, kRows, kHw>); break;
        case 2: go(fp8_gemv_kernel<2, kRows, kHw>); break;
        case 3: go(fp8_gemv_kernel<3, kRows, kHw>); break;
        default: go(fp8_gemv_kernel<4, kRows, kHw>); break;
    }
}

#if defined(AFF_GPU_IS_CUDA)
constexpr bool kHardwareDecode = true;
#else
constexpr bool kHardwareDecode = false;
#endif

void check_common(int k, int batch, const Fp8GemvTuning& t) {
    if (k <= 0 || k % 128 != 0) throw_argument("fp8_gemv", "k must be a positive multiple of 128");
    if (t.rows_per_group != 4 && t.rows_per_group != 8) throw_argument("fp8_gemv", "rows_per_group must be 4 or 8");
    if (batch < 1 || batch > kFp8GemvMaxBatch) throw_argument("fp8_gemv", "batch must be 1..4");
    if (t.portable_decode && t.rows_per_group != 8)
        throw_argument("fp8_gemv", "the portable decoder is built for 8 rows per group");
}

void check_part(int n, int ldy, const Fp8GemvTuning& t) {
    if (n <= 0 || n % t.rows_per_group != 0) throw_argument("fp8_gemv", "n must be a positive multiple of rows_per_group");
    if (ldy < n) throw_argument("fp8_gemv", "ldy must be at least n");
}

void dispatch(const Parts& parts, int k, const float* x, int batch, const Fp8GemvLayout& layout, const Fp8GemvTuning& t,
              void* stream) {
    const auto s = static_cast<hipStream_t>(stream);
    if (t.portable_decode) {
#if defined(AFF_GPU_IS_CUDA)
        launch_fp8_gemv<8, false>(parts, k, x, batch, layout, t.dependent_launch, s);
#else
        launch_fp8_gemv<8, kHardwareDecode>(parts, k, x, batch, layout, t.dependent_launch, s);
#endif
    } else if (t.rows_per_group == 8) {
        launch_fp8_gemv<8, kHardwareDecode>(parts, k, x, batch, layout, t.dependent_launch, s);
    } else {
        launch_fp8_gemv<4, kHardwareDecode>(parts, k, x, batch, layout, t.dependent_launch, s);
    }
}

}  // namespace

void fp8_gemv_layout(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
                     const Fp8GemvLayout& given, const Fp8GemvTuning& t, void* stream) {
    check_common(k, batch, t);
    Fp8GemvLayout layout = given;
    if (layout.ldx == 0) layout.ldx = k;
    if (layout.ldy == 0) layout.ldy = n;
    if (layout.group_rows == 0) layout.group_rows = n;
    check_part(n, layout.ldy, t);
    if (layout.ldx < k || layout.ldx % 4 != 0) throw_argument("fp8_gemv", "ldx must be a multiple of 4 and at least k");
    if (layout.group_rows % t.rows_per_group != 0 || layout.x_group_stride % 4 != 0)
        throw_argument("fp8_gemv", "group_rows must be a multiple of rows_per_group, x_group_stride of 4");
    Parts parts{};
    parts.w[0] = w;
    parts.scales[0] = scales;
    parts.y[0] = y;
    parts.n[0] = n;
    parts.ldy[0] = layout.ldy;
    parts.count = 1;
    dispatch(parts, k, x, batch, layout, t, stream);
}

void fp8_gemv_multi(const Fp8GemvPart* given, int count, int k, const float* x, int ldx, int batch,
                    const Fp8GemvTuning& t, void* stream) {
    check_common(k, batch, t);
    if (count < 1 || count > kFp8GemvMaxParts) throw_argument("fp8_gemv_multi", "1 to 3 matrices a launch");
    if (ldx == 0) ldx = k;
    if (ldx < k || ldx % 4 != 0) throw_argument("fp8_gemv", "ldx must be a multiple of 4 and at least k");
    Parts parts{};
    Fp8GemvLayout layout;
    layout.ldx = ldx;
    for (int i = 0; i < count; ++i) {
        const int ldy = given[i].ldy ? given[i].ldy : given[i].n;
        check_part(given[i].n, ldy, t);
        parts.w[i] = given[i].w;
        parts.scales[i] = given[i].scales;
        parts.y[i] = given[i].y;
        parts.n[i] = given[i].n;
        parts.ldy[i] = ldy;
        layout.group_rows = layout.group_rows > given[i].n ? layout.group_rows : given[i].n;  // one group a part
    }
    parts.count = count;
    dispatch(parts, k, x, batch, layout, t, stream);
}

void fp8_gemv_tuned(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
                    const Fp8GemvTuning& t, void* stream) {
    fp8_gemv_layout(w, scales, n, k, x, batch, y, Fp8GemvLayout{}, t, stream);
}

void fp8_gemv(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
              void* stream) {
    fp8_gemv_tuned(w, scales, n, k, x, batch, y, kFp8GemvDefault, stream);
}

}  // namespace aff::gpu
