// CPU twins of kernels/dense_gemv.hip, kernels/embed.hip and kernels/swiglu.hip: the same
// functions in plain C++ (sums in double), the oracles of tests/gpu. See rms_norm.hpp for why
// twins live here.
#pragma once

#include "kernels/dense_gemv.hpp"

#include <cstdint>

namespace aff::cpu {

// BF16 bits to float (exact) and float to the nearest-even BF16 bits.
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float v);

// Same contracts as the aff::gpu functions of the same names, host pointers.
void dense_gemv(const void* w, gpu::DenseType type, int n, int k, const float* x, int ldx, int batch, float* y,
                int ldy);
void dense_gemv_indexed(const void* w, gpu::DenseType type, int n, int k, const int32_t* ids, int jobs,
                        const float* x, int x_group, float* y);
void embed(const void* table, gpu::DenseType type, int dim, const int32_t* tokens, int n, int copies, float* out);
void swiglu(const float* gate, const float* up, long long count, float limit, float* out);
void moe_combine(const float* routed, const float* weights, int tokens, int k, int dim, const float* shared,
                 float* out);

}  // namespace aff::cpu
