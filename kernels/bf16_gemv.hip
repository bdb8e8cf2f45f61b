// BF16 GEMV kernel (declarations and contract in bf16_gemv.hpp). Memory-bound: each weight is
// read once for every row of x, so the work is how many 16-byte weight loads are in flight.
// A block of 256 threads is split into row groups of `tpr` threads (a power of two, 32..256,
// chosen from k so each thread has a chunk or two of 8 weights per row); a group owns kRows
// consecutive rows and its threads split the rows' chunks. Each thread issues the loads of
// kUnroll chunks of all its rows before using any, reads the chunk's activations (fp32, from
// L1: x is small and shared by every block) once for all kRows rows, widens the BF16 words
// in registers (a shift or a mask) and accumulates in fp32. The kRows·batch sums are reduced
// across the warp by the reduce-scatter butterfly of gemv_reduce.hpp, then across the group's
// warps in shared memory. With a dependent launch (NVIDIA sm_90) the first weight loads go
// out before the wait for the previous kernel, and the kernel lets the next one launch once
// its outputs are written (not earlier: see the end of the kernel).
#include "kernels/bf16_gemv.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"
#include "kernels/gemv_reduce.hpp"
#include "kernels/launch.hpp"

#include <type_traits>

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
using dev::log2_of;
using dev::pow2_at_least;

// acc[b·kRows + r] += Σ_j w_r[j] · x_b[j] over one chunk of 8 columns.
template <int B, int kRows, int V>
__device__ inline void chunk_dot(const uint4 (&wv)[kRows], const float* __restrict__ x, int ldx, int c,
                                 float (&acc)[V]) {
    float xs[B][8];
#pragma unroll
    for (int b = 0; b < B; ++b) {
        const float4* xb = reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * ldx) + 2 * c;
        const float4 lo = dev::ldg(xb), hi = dev::ldg(xb + 1);
        xs[b][0] = lo.x;
        xs[b][1] = lo.y;
        xs[b][2] = lo.z;
        xs[b][3] = lo.w;
        xs[b][4] = hi.x;
        xs[b][5] = hi.y;
        xs[b][6] = hi.z;
        xs[b][7] = hi.w;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const uint32_t words[4] = {wv[r].x, wv[r].y, wv[r].z, wv[r].w};
        float f[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            f[2 * j] = dev::bits_to_float(words[j] << 16);
            f[2 * j + 1] = dev::bits_to_float(words[j] & 0xffff0000u);
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            float s = acc[b * kRows + r];
#pragma unroll
            for (int j = 0; j < 8; ++j) s += f[j] * xs[b][j];
            acc[b * kRows + r] = s;
        }
    }
}

template <int B, int kRows, int kUnroll>
__global__ void __launch_bounds__(kThreads, 2)
    bf16_gemv_kernel(const uint16_t* __restrict__ w, int n, int k, const float* __restrict__ x, int ldx,
                     float* __restrict__ y, int ldy, int tpr_log2) {
    constexpr int V = pow2_at_least(B * kRows);
    __shared__ float red[kThreads / kWarp][V];
    const int tpr = 1 << tpr_log2;
    const int tid = static_cast<int>(dev::thread_x());
    const int group = tid >> tpr_log2;
    const int gt = tid & (tpr - 1);
    const int row0 = (static_cast<int>(dev::block_x()) * (kThreads >> tpr_log2) + group) * kRows;
    const int chunks = k / 8;
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.0f;

    if (row0 < n) {
        // Rows past n (a last group of a matrix whose n is not a multiple of kRows) read the
        // last row again and are not written.
        const uint4* wr[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            wr[r] = reinterpret_cast<const uint4*>(w + static_cast<size_t>(row0 + r < n ? row0 + r : n - 1) * k);
        bool waited = false;
        for (int c = gt; c < chunks; c += kUnroll * tpr) {
            uint4 wv[kUnroll][kRows];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u)
                if (u == 0 || c + u * tpr < chunks) {
#pragma unroll
                    for (int r = 0; r < kRows; ++r) wv[u][r] = dev::load_stream(wr[r] + c + u * tpr);
                }
            if (!waited) {  // weights are in flight; x may come from the previous kernel
                dev::wait_prerequisites();
                waited = true;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u)
                if (u == 0 || c + u * tpr < chunks) chunk_dot<B, kRows, V>(wv[u], x, ldx, c + u * tpr, acc);
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
        const int b = gt / kRows, r = gt % kRows;
        if (row0 + r < n) {
            float sum = 0.0f;
            for (int i = 0; i < warps_per_group; ++i) sum += red[group * warps_per_group + i][gt];
            y[static_cast<size_t>(b) * ldy + row0 + r] = sum;
        }
    }
    // Only now may the next kernel start: a dependent kernel's wait covers what was written
    // before this point. Triggering at the start (as fp8_gemv does) let the forward's next
    // GEMV read a stale input (tests/gpu/RESULTS.md, decode tests).
    dev::launch_dependents();
}

template <int kRows, int kUnroll>
void launch(const uint16_t* w, int n, int k, const float* x, int ldx, int batch, float* y, int ldy, bool dependent,
            hipStream_t stream) {
    const int chunks = k / 8;
    int tpr = kWarp;
    while (tpr * 2 <= chunks && tpr < kThreads) tpr *= 2;
    const int rows_per_block = (kThreads / tpr) * kRows;
    const dim3 grid((n + rows_per_block - 1) / rows_per_block);
    const int tpr_log2 = log2_of(tpr);
    auto go = [&](auto kernel) {
        launch_gpu_kernel(kernel, grid, dim3(kThreads), 0, stream, dependent, w, n, k, x, ldx, y, ldy, tpr_log2);
    };
    switch (batch) {
        case 1: go(bf16_gemv_kernel<1, kRows, kUnroll>); break;
        case 2: go(bf16_gemv_kernel<2, kRows, kUnroll>); break;
        case 3: go(bf16_gemv_kernel<3, kRows, kUnroll>); break;
        default: go(bf16_gemv_kernel<4, kRows, kUnroll>); break;
    }
}

// Rows a group shares its activation loads over when the caller leaves it to us: the most
// (up to 8) that still gives the grid 256 blocks, so small matrices (router 256 × 4096,
// indexer weights 64 × 4096) spread over the chip instead of a few multiprocessors.
int auto_rows(int n, int k) {
    const int chunks = k / 8;
    int tpr = kWarp;
    while (tpr * 2 <= chunks && tpr < kThreads) tpr *= 2;
    const int groups = kThreads / tpr;
    for (int rows = 8; rows > 1; rows /= 2)
        if ((n + rows * groups - 1) / (rows * groups) >= 256) return rows;
    return 1;
}

}  // namespace

bool bf16_gemv_takes(const void* w, int k, const float* x, int ldx, int batch) {
    return k > 0 && k % 8 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
           ldx % 4 == 0 && batch >= 1 && batch <= kBf16GemvMaxBatch;
}

void bf16_gemv(const uint16_t* w, int n, int k, const float* x, int ldx, int batch, float* y, int ldy, void* stream,
               const Bf16GemvTuning& t) {
    if (n <= 0) throw_argument("bf16_gemv", "n must be positive");
    if (!bf16_gemv_takes(w, k, x, ldx, batch))
        throw_argument("bf16_gemv", "needs k % 8 == 0, 16-byte aligned w and x, ldx % 4 == 0, batch 1..4");
    if (ldx < k || ldy < n) throw_argument("bf16_gemv", "row strides must cover k inputs and n outputs");
    const int rows = t.rows_per_group == 0 ? auto_rows(n, k) : t.rows_per_group;
    const int unroll = t.unroll == 0 ? (rows == 8 ? 1 : 2) : t.unroll;
    if (unroll != 1 && unroll != 2) throw_argument("bf16_gemv", "unroll must be 0, 1 or 2");
    const auto s = static_cast<hipStream_t>(stream);
    const bool dep = t.dependent_launch;
    auto with_unroll = [&](auto rows_c) {
        constexpr int kRows = decltype(rows_c)::value;
        if (unroll == 1) launch<kRows, 1>(w, n, k, x, ldx, batch, y, ldy, dep, s);
        else launch<kRows, 2>(w, n, k, x, ldx, batch, y, ldy, dep, s);
    };
    switch (rows) {
        case 1: with_unroll(std::integral_constant<int, 1>{}); break;
        case 2: with_unroll(std::integral_constant<int, 2>{}); break;
        case 4: with_unroll(std::integral_constant<int, 4>{}); break;
        case 8: with_unroll(std::integral_constant<int, 8>{}); break;
        default: throw_argument("bf16_gemv", "rows_per_group must be 0, 1, 2, 4 or 8");
    }
}

}  // namespace aff::gpu
