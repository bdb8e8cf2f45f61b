// FP8 GEMV for decode (batch 1–4) on the GPU: dense FP8 E4M3 weights with one E8M0 scale per
// 128×128 block (model doc §2.1), read from memory as FP8 and decoded in registers.
// Activations and outputs are fp32; the reference's on-the-fly FP8 activation quantisation
// (model doc §3.11) is not simulated. Host-callable declarations only; device code in
// fp8_gemv.hip, CPU twin in libaff/gpu/reference/, speed in tests/bench/fp8_gemv_bench.
#pragma once

#include <cstdint>

namespace aff::gpu {

inline constexpr int kFp8GemvMaxBatch = 4;

// How the kernel is shaped and launched; fp8_gemv uses kFp8GemvDefault, the fastest measured
// (tests/bench/RESULTS.md). dependent_launch (NVIDIA sm_90+; a plain launch elsewhere): the
// kernel may start while the previous kernel in the stream still runs and reads w and scales
// before waiting for it, so w and scales must not be written by the kernels just before it;
// x is read and y written only after the wait. portable_decode: the integer FP8 decoder that
// AMD builds use, instead of the hardware conversion (8 rows per group only).
// min_blocks: thread blocks per multiprocessor the kernel is compiled for (2, 3 or 4; 3 and
// 4 only with 8 rows and the hardware decoder): more blocks cap the registers lower
// (128 / 85 / 64) for more loads in flight per multiprocessor.
struct Fp8GemvTuning {
    int rows_per_group = 8;   // 4 or 8
    bool dependent_launch = false;
    bool portable_decode = false;
    int min_blocks = 2;
};
// Measured best on the H200 (2026-11-29): 8 rows, dependent launch (65 % / 42 % of the read
// ceiling at batch 1 / 4, against 53 % / 37 % without the dependent launch).
inline constexpr Fp8GemvTuning kFp8GemvDefault{8, true, false, 2};

// y[b][r] = Σ_c e4m3(w[r][c]) · 2^(scales[r/128][c/128] − 127) · x[b][c] for b < batch,
// r < n, c < k. w is [n][k] bytes, scales [ceil(n/128)][k/128] bytes, x [batch][k],
// y [batch][n]; all device memory, w 16-byte aligned. Needs k % 128 == 0,
// n % rows_per_group == 0, 1 <= batch <= 4 (throws unsupported otherwise).
void fp8_gemv(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
              void* stream);
void fp8_gemv_tuned(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
                    const Fp8GemvTuning& tuning, void* stream);

// Same products, fp32 partial sums in another order (the CPU twin sums in double).
inline constexpr double fp8_gemv_max_nmse = 1e-9;

}  // namespace aff::gpu
