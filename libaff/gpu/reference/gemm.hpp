// CPU twins of the prefill GEMMs (kernels/fp8_gemm.hip, kernels/moe_gemm.hip): the same
// products with the same bf16 roundings of their inputs, summed in double, so a device test
// can hold the kernels to an fp32-ordering bound, while the bf16 cost itself is measured
// against the exact twins (fp8_gemv.hpp, moe_gemv.hpp). See rms_norm.hpp for why twins live here.
#pragma once

#include "libaff/quant/codebook.hpp"

#include <cstdint>

namespace aff::cpu {

// Same contract as aff::gpu::fp8_gemm, host pointers, x rows k apart, y rows n apart.
void fp8_gemm(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int m, float* y);

// One expert's part of aff::gpu::moe_gemm: y[i][r] = Σ_c bf16(Ŵ[r][c]) · bf16(x[i][c]) for
// i < m (x [m][k], y [m][n]), Ŵ decoded by aff::quant::decode_block.
void moe_gemm(const uint8_t* w, int n, int k, const aff::quant::Codebook& codebook, const float* x, int m, float* y);

}  // namespace aff::cpu
