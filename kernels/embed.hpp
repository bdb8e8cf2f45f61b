// Token embedding on the GPU (model doc §3.0): each token's row of the embedding table, copied
// into every residual stream. The table is BF16 or F32 (kernels/dense_gemv.hpp's DenseType),
// the output fp32. Host-callable declarations only; device code in embed.hip, CPU twin in
// libaff/gpu/reference/embed.cpp.
#pragma once

#include "kernels/dense_gemv.hpp"

#include <cstdint>

namespace aff::gpu {

// out[t][s][d] = table[tokens[t]][d] for t < n, s < copies, d < dim. tokens: device int32,
// each in [0, vocab) (checked on the host before upload). All pointers are device memory.
void embed(const void* table, DenseType type, int dim, const int32_t* tokens, int n, int copies, float* out,
           void* stream);

// A copy: exact.
inline constexpr double embed_max_nmse = 0.0;

}  // namespace aff::gpu
