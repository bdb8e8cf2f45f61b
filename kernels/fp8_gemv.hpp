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
struct Fp8GemvTuning {
    int rows_per_group = 8;   // 4 or 8
    bool dependent_launch = false;
    bool portable_decode = false;
};
// Measured best on the H200 (2026-11-29): 8 rows, dependent launch (65 % / 42 % of the read
// ceiling at batch 1 / 4, against 53 % / 37 % without the dependent launch).
inline constexpr Fp8GemvTuning kFp8GemvDefault{8, true, false};

// y[b][r] = Σ_c e4m3(w[r][c]) · 2^(scales[r/128][c/128] − 127) · x[b][c] for b < batch,
// r < n, c < k. w is [n][k] bytes, scales [ceil(n/128)][k/128] bytes, x [batch][k],
// y [batch][n]; all device memory, w 16-byte aligned. Needs k % 128 == 0,
// n % rows_per_group == 0, 1 <= batch <= 4 (throws unsupported otherwise).
void fp8_gemv(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
              void* stream);
void fp8_gemv_tuned(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
                    const Fp8GemvTuning& tuning, void* stream);

// Where a launch's inputs and outputs lie when they are not dense [batch][k] / [batch][n]:
// token b's input row starts at x + b·ldx and its output at y + b·ldy (0: k and n). Rows
// form groups of group_rows (0: all n rows, one group) and row group g reads its input
// x_group_stride floats further: one launch then covers the forward's grouped wo_a (each
// of G groups of rows multiplies its own slice of the attention output). group_rows must be a
// multiple of rows_per_group; ldx and x_group_stride multiples of 4, x 16-byte aligned.
struct Fp8GemvLayout {
    int ldx = 0;
    int ldy = 0;
    int group_rows = 0;
    long long x_group_stride = 0;
};
void fp8_gemv_layout(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y,
                     const Fp8GemvLayout& layout, const Fp8GemvTuning& tuning, void* stream);

// Several matrices of the same k over the same input in one launch (the forward's wq_a and
// wkv, the shared expert's w1 and w3): each part's y is exactly, bit for bit, what fp8_gemv of
// that part alone writes (w, scales, n as there; ldy 0: n), one launch instead of `count`.
// x as fp8_gemv_layout's (ldx 0: k). Throws as fp8_gemv does, or for count outside 1..3.
inline constexpr int kFp8GemvMaxParts = 3;
struct Fp8GemvPart {
    const uint8_t* w = nullptr;
    const uint8_t* scales = nullptr;
    int n = 0;
    float* y = nullptr;
    int ldy = 0;
};
void fp8_gemv_multi(const Fp8GemvPart* parts, int count, int k, const float* x, int ldx, int batch,
                    const Fp8GemvTuning& tuning, void* stream);

// Same products, fp32 partial sums in another order (the CPU twin sums in double).
inline constexpr double fp8_gemv_max_nmse = 1e-9;

}  // namespace aff::gpu
