// RMSNorm on the GPU (model doc §3.1): the weighted norm (attn_norm, ffn_norm, q_norm,
// kv_norm, ...) and, with no weight, the per-head unweighted q norm. Host-callable
// declarations only; device code in rms_norm.hip, CPU twin in libaff/gpu/reference/.
#pragma once

namespace aff::gpu {

// y[r] = w ⊙ x[r] / sqrt(mean(x[r]²) + eps) for each of `rows` rows of `n` floats, fp32
// throughout. w == nullptr gives the unweighted norm (rows = tokens × heads, n = 512 for
// the q heads). x and y may be the same buffer. All pointers are device memory.
void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps, void* stream);

// Largest ‖gpu − cpu‖² / ‖cpu‖² accepted by tests/gpu and aff-gpucheck: fp32 sums in a
// different order, nothing else differs.
inline constexpr double rms_norm_max_nmse = 1e-10;

}  // namespace aff::gpu
