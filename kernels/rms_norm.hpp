// RMSNorm on the GPU (model doc §3.1): the weighted norm (attn_norm, ffn_norm, q_norm,
// kv_norm, ...) and, with no weight, the per-head unweighted q norm. Host-callable
// declarations only; device code in rms_norm.hip, CPU twin in libaff/gpu/reference/.
#pragma once

#include "kernels/rope.hpp"

#include <cstdint>

namespace aff::gpu {

// y[r] = w ⊙ x[r] / sqrt(mean(x[r]²) + eps) for each of `rows` rows of `n` floats, fp32
// throughout. w == nullptr gives the unweighted norm (rows = tokens × heads, n = 512 for
// the q heads). x and y may be the same buffer. All pointers are device memory.
void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps, void* stream);

// rms_norm of tokens × vecs rows of n floats (row r: vector r % vecs of token r / vecs), then
// rope() of the result (the last 2·table.pairs channels of each row by positions[token]),
// in one launch: y is bit for bit what rms_norm followed by rope writes. The forward's q heads
// (unweighted, 64 vectors a token) and latent kv (kv_norm, one) take it.
void rms_norm_rope(const float* x, const float* w, float* y, int tokens, int vecs, int n, float eps,
                   const int32_t* positions, const RopeTable& table, bool inverse, void* stream);

// Largest ‖gpu − cpu‖² / ‖cpu‖² accepted by tests/gpu and aff-gpucheck: fp32 sums in a
// different order, nothing else differs.
inline constexpr double rms_norm_max_nmse = 1e-10;

}  // namespace aff::gpu
