// FP8 and BF16-weight GEMM kernel (declarations and contract in fp8_gemm.hpp). A block of 256 threads (8
// warps, 2 along tokens × 4 along weight rows) computes a 128-token × 128-row tile of y in
// k-steps of 64: the step's activations (fp32 → bf16) and weights (FP8 × block scale → bf16,
// exact: an E4M3 value has 4 significant bits) go to shared memory, each warp multiplies its
// 64 × 32 part with kernels/mma_tile.hpp. The next step's global loads are issued into
// registers before the current step's products, so memory and tensor cores overlap.
#include "kernels/fp8_gemm.hpp"

#include "kernels/check.hpp"
#include "kernels/mma_tile.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128;  // tokens a tile
constexpr int kBN = 128;  // weight rows a tile
constexpr int kBK = 64;
constexpr int kLd = kBK + dev::kTilePad;
constexpr int kMT = 4, kNT = 4;              // warp tile 64 × 32
constexpr int kXLoads = kBM * kBK / 4 / kThreads;   // float4 a thread a step: 8
// uint4 of weights a thread loads a step: 2 for FP8, 4 for BF16.
template <bool kBf16>
constexpr int kWLoads = kBN * kBK * (kBf16 ? 2 : 1) / 16 / kThreads;

// One FP8 byte → float without its block scale, times 2^-120 (sign and 7 low bits placed in
// a float's sign and bits 20..26); the caller multiplies by 2^120, then by the scale (two
// steps, so no scale up to 2^127 overflows). Exact for normals and subnormals.
__device__ inline float e4m3_shifted(uint32_t b) {
    return dev::bits_to_float(((b & 0x80u) << 24) | ((b & 0x7fu) << 20));
}

// kBf16: w holds BF16 weights (2 bytes each, no scales), copied to shared memory as they are.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    gemm_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scales, int n, int k,
                const float* __restrict__ x, int ldx, int m, float* __restrict__ y, int ldy) {
    constexpr int kW = kWLoads<kBf16>;
    constexpr int kChunks = kBK * (kBf16 ? 2 : 1) / 16;  // uint4 a tile row
    constexpr size_t kElem = kBf16 ? 2 : 1;
    __shared__ __attribute__((aligned(16))) uint16_t As[kBM * kLd];
    __shared__ __attribute__((aligned(16))) uint16_t Bs[kBN * kLd];
    const int tid = static_cast<int>(dev::thread_x());
    const int bn = static_cast<int>(dev::block_x()) * kBN;
    const int bm = static_cast<int>(dev::block_y()) * kBM;
    const int warp = tid / kWarp;
    const int wm = (warp / 4) * (kMT * 16), wn = (warp % 4) * (kNT * 8);
    const int kblocks = k / 128;

    float4 xr[kXLoads];
    uint4 wr[kW];
    float ws[kW];
    auto load = [&](int kb) {
#pragma unroll
        for (int i = 0; i < kXLoads; ++i) {
            const int idx = tid + i * kThreads, row = idx / (kBK / 4), c4 = idx % (kBK / 4);
            if (bm + row < m)
                xr[i] = dev::ldg(reinterpret_cast<const float4*>(x + static_cast<size_t>(bm + row) * ldx + kb) + c4);
            else
                xr[i] = float4{0.0f, 0.0f, 0.0f, 0.0f};
        }
#pragma unroll
        for (int i = 0; i < kW; ++i) {
            const int idx = tid + i * kThreads, row = idx / kChunks, c16 = idx % kChunks;
            if (bn + row < n) {
                wr[i] = dev::load_stream(
                    reinterpret_cast<const uint4*>(w + (static_cast<size_t>(bn + row) * k + kb) * kElem) + c16);
                if constexpr (!kBf16)
                    ws[i] = dev::e8m0_to_float(scales[static_cast<size_t>((bn + row) / 128) * kblocks + kb / 128]);
            } else {
                wr[i] = uint4{0u, 0u, 0u, 0u};
                ws[i] = 0.0f;
            }
        }
    };
    auto store = [&] {
#pragma unroll
        for (int i = 0; i < kXLoads; ++i) {
            const int idx = tid + i * kThreads, row = idx / (kBK / 4), c4 = idx % (kBK / 4);
            uint32_t* dst = reinterpret_cast<uint32_t*>(As + row * kLd + c4 * 4);
            dst[0] = dev::pack_bf16x2(xr[i].x, xr[i].y);
            dst[1] = dev::pack_bf16x2(xr[i].z, xr[i].w);
        }
#pragma unroll
        for (int i = 0; i < kW; ++i) {
            const int idx = tid + i * kThreads, row = idx / kChunks, c16 = idx % kChunks;
            if constexpr (kBf16) {
                *reinterpret_cast<uint4*>(Bs + row * kLd + c16 * 8) = wr[i];
                continue;
            }
            const uint32_t words[4] = {wr[i].x, wr[i].y, wr[i].z, wr[i].w};
            uint32_t out[8];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const uint32_t u = words[q];
                // Exact products (4 significant bits), so truncating to bf16 loses nothing.
                const float f0 = e4m3_shifted(u & 0xffu) * 0x1p120f * ws[i];
                const float f1 = e4m3_shifted((u >> 8) & 0xffu) * 0x1p120f * ws[i];
                const float f2 = e4m3_shifted((u >> 16) & 0xffu) * 0x1p120f * ws[i];
                const float f3 = e4m3_shifted(u >> 24) * 0x1p120f * ws[i];
                out[2 * q] = (dev::float_to_bits(f0) >> 16) | (dev::float_to_bits(f1) & 0xffff0000u);
                out[2 * q + 1] = (dev::float_to_bits(f2) >> 16) | (dev::float_to_bits(f3) & 0xffff0000u);
            }
            uint4* dst = reinterpret_cast<uint4*>(Bs + row * kLd + c16 * 16);
            dst[0] = uint4{out[0], out[1], out[2], out[3]};
            dst[1] = uint4{out[4], out[5], out[6], out[7]};
        }
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
        store();
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
        for (int b = 0; b < kNT; ++b) {
            const int col = bn + wn + 8 * b + 2 * t;
            if (col >= n) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = bm + wm + 16 * a + g + 8 * h;
                if (row < m)
                    *reinterpret_cast<float2*>(y + static_cast<size_t>(row) * ldy + col) =
                        float2{acc[a][b][2 * h], acc[a][b][2 * h + 1]};
            }
        }
}

}  // namespace

bool fp8_gemm_takes(int n, int k, const float* x, int ldx, const float* y, int ldy) {
    return k > 0 && k % 128 == 0 && n > 0 && n % 8 == 0 && ldx % 4 == 0 && ldx >= k && ldy % 2 == 0 && ldy >= n &&
           reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
}

bool bf16_gemm_takes(int n, int k, const float* x, int ldx, const float* y, int ldy) {
    return k > 0 && k % kBK == 0 && n > 0 && n % 8 == 0 && ldx % 4 == 0 && ldx >= k && ldy % 2 == 0 && ldy >= n &&
           reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
}

void bf16_gemm(const uint16_t* w, int n, int k, const float* x, int ldx, int m, float* y, int ldy, void* stream) {
    if (!bf16_gemm_takes(n, k, x, ldx, y, ldy))
        throw_argument("bf16_gemm", "needs k % 64 == 0, n % 8 == 0, ldx % 4 == 0, ldy even, aligned x and y");
    if (m < 1 || m > 65535 * kBM) throw_argument("bf16_gemm", "m must be 1..8388480");
    const dim3 grid(static_cast<unsigned>((n + kBN - 1) / kBN), static_cast<unsigned>((m + kBM - 1) / kBM));
    gemm_kernel<true><<<grid, dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        reinterpret_cast<const uint8_t*>(w), nullptr, n, k, x, ldx, m, y, ldy);
    AFF_GPU_CHECK(hipGetLastError());
}

void fp8_gemm(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int ldx, int m, float* y,
              int ldy, void* stream) {
    if (!fp8_gemm_takes(n, k, x, ldx, y, ldy))
        throw_argument("fp8_gemm", "needs k % 128 == 0, n % 8 == 0, ldx % 4 == 0, ldy even, aligned x and y");
    if (m < 1 || m > 65535 * kBM) throw_argument("fp8_gemm", "m must be 1..8388480");
    const dim3 grid(static_cast<unsigned>((n + kBN - 1) / kBN), static_cast<unsigned>((m + kBM - 1) / kBM));
    gemm_kernel<false><<<grid, dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(w, scales, n, k, x, ldx, m, y, ldy);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
