// FP8 GEMV for decode (batch 1–4) on the GPU: dense FP8 E4M3 weights with one E8M0 scale per
// 128×128 block (model doc §2.1), read from memory as FP8 and decoded in registers.
// Activations and outputs are fp32; the reference's on-the-fly FP8 activation quantisation
// (model doc §3.11) is not simulated. Host-callable declarations only; device code in
// fp8_gemv.hip, CPU twin in libaff/gpu/reference/, speed in tests/bench/fp8_gemv_bench.
#pragma once

#include <cstdint>

namespace aff::gpu {

inline constexpr int kFp8GemvMaxBatch = 4;

// y[b][r] = Σ_c e4m3(w[r][c]) · 2^(scales[r/128][c/128] − 127) · x[b][c] for b < batch,
// r < n, c < k. w is [n][k] bytes, scales [ceil(n/128)][k/128] bytes, x [batch][k],
// y [batch][n]; all device memory, w 16-byte aligned. Needs k % 128 == 0, n % 8 == 0,
// 1 <= batch <= 4 (throws unsupported otherwise).
void fp8_gemv(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
              void* stream);

// The same GEMV with the portable FP8 decoder (integer bit placement) instead of the hardware
// conversion; tests/bench/fp8_gemv_bench times both.
void fp8_gemv_bitdecode(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
                        void* stream);

// Same products, fp32 partial sums in another order (the CPU twin sums in double).
inline constexpr double fp8_gemv_max_nmse = 1e-9;

}  // namespace aff::gpu
