// BF16 GEMV for decode (batch 1–4) on the GPU: the head (129280 × 4096, the largest single
// read of a decode step) and every BF16 linear of the forward (router, compressors, indexer
// weights). Each weight is read once for all the batch's rows, with many 16-byte loads in
// flight; the activations stay fp32 and are read once per kRows weight rows from L1.
// dense_gemv remains the general fallback (F32 weights, k % 8 != 0, unaligned inputs).
// Host-callable declarations only; device code in bf16_gemv.hip, CPU twin
// libaff/gpu/reference/dense_gemv.cpp (dense_gemv_ref with DenseType::bf16), speed in
// tests/bench/bf16_gemv_bench.
#pragma once

#include <cstdint>

namespace aff::gpu {

inline constexpr int kBf16GemvMaxBatch = 4;

// How a launch is shaped. rows_per_group: weight rows a group of threads shares each
// activation load over (1, 2, 4 or 8; 0: chosen from n so the grid covers the chip).
// unroll: chunks of every row a thread loads before using any (1 or 2; 0: 1 at 8 rows, else 2).
// dependent_launch (NVIDIA sm_90+; a plain launch elsewhere): weight loads may start while
// the previous kernel of the stream still runs, so w must not be written by the kernel just
// before; x is read and y written after the wait; the next kernel may launch only once y is
// written.
struct Bf16GemvTuning {
    int rows_per_group = 0;
    int unroll = 0;
    bool dependent_launch = true;
};
inline constexpr Bf16GemvTuning kBf16GemvDefault{};

// Whether bf16_gemv takes the call: k % 8 == 0, w 16-byte aligned, x 16-byte aligned with
// ldx % 4 == 0 (the kernel reads float4s), batch 1..4.
bool bf16_gemv_takes(const void* w, int k, const float* x, int ldx, int batch);

// y[b][r] = Σ_c bf16(w[r][c]) · x[b][c] for b < batch, r < n, c < k; w [n][k] BF16 (uint16
// bits) row-major; x rows ldx floats apart, y rows ldy apart; device memory. Throws
// unsupported when bf16_gemv_takes is false.
void bf16_gemv(const std::uint16_t* w, int n, int k, const float* x, int ldx, int batch, float* y, int ldy,
               void* stream, const Bf16GemvTuning& tuning = kBf16GemvDefault);

// fp32 sums in another order than the twin's double sums (as dense_gemv).
inline constexpr double bf16_gemv_max_nmse = 1e-10;

}  // namespace aff::gpu
