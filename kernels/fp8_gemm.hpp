// FP8 GEMM for prefill on the GPU: dense projections whose weights the checkpoint stores as FP8
// E4M3 with one E8M0 scale per 128×128 block (model doc §2.1), applied to many tokens at once.
// Weights are read as FP8 and widened (times their block scale, exactly) to bf16 in shared
// memory; activations are fp32 in memory and rounded to bf16 on the way in; products run on
// the tensor cores (mma.sync bf16, fp32 accumulate; kernels/mma_tile.hpp says what runs
// elsewhere). The decode path (1–4 tokens) stays fp8_gemv, which keeps fp32 activations.
// Host-callable declarations only; device code in fp8_gemm.hip, CPU twin in
// libaff/gpu/reference/gemm.hpp, speed in tests/bench/prefill_bench.
#pragma once

#include <cstdint>

namespace aff::gpu {

// y[i][r] = Σ_c bf16(x[i][c]) · e4m3(w[r][c]) · 2^(scales[r/128][c/128] − 127) for i < m,
// r < n, c < k; x rows ldx floats apart, y rows ldy floats apart. w [n][k] bytes (16-byte
// aligned), scales [ceil(n/128)][k/128]; all device memory. Needs k % 128 == 0, n % 8 == 0,
// m >= 1, ldx % 4 == 0 and x 16-byte aligned, ldy % 2 == 0 and y 8-byte aligned (throws
// unsupported otherwise). fp8_gemm_takes says whether a call would be accepted.
void fp8_gemm(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int ldx, int m, float* y,
              int ldy, void* stream);
bool fp8_gemm_takes(int n, int k, const float* x, int ldx, const float* y, int ldy);

// The same kernel for the checkpoint's BF16 projections (router gate, compressor and indexer
// projections): y[i][r] = Σ_c bf16(x[i][c]) · w[r][c], w [n][k] BF16 (16-byte aligned).
// Needs k % 64 == 0 and the rest as fp8_gemm.
void bf16_gemm(const uint16_t* w, int n, int k, const float* x, int ldx, int m, float* y, int ldy, void* stream);
bool bf16_gemm_takes(int n, int k, const float* x, int ldx, const float* y, int ldy);

// Against the twin, which rounds x (for bf16_gemm: dense_gemv's twin on rounded x) to bf16 the same way and sums in double: only the fp32
// accumulation order differs (k ≤ 32768 terms: relative error well under 1e-5, NMSE under 1e-9).
inline constexpr double fp8_gemm_max_nmse = 1e-9;
// Against the exact product (fp32 x, as fp8_gemv computes it): x's bf16 rounding (relative
// error up to 2^-9, RMS 2^-9/√3 for uniform rounding) gives an NMSE about 1.3e-6; bound 1e-5.
inline constexpr double fp8_gemm_max_nmse_vs_exact = 1e-5;

}  // namespace aff::gpu
