// Dense GEMV for the tensors that are neither FP8 nor codebook-quantised: F32 weights, BF16
// weights whose shape kernels/bf16_gemv refuses (the forward's BF16 linears and head take
// bf16_gemv), and routed experts of an unquantised checkpoint (indexed form), against fp32
// activations. One plain form for a
// fixed matrix and any batch (rows of x, split into chunks of kDenseGemvBatch per block), and
// one indexed form for a stack of same-shaped matrices (routed experts) where each job picks
// its matrix by an id read from device memory, so routing needs no trip to the host.
// Host-callable declarations only; device code in dense_gemv.hip, CPU twin in
// libaff/gpu/reference/dense_gemv.cpp.
#pragma once

#include <cstdint>

namespace aff::gpu {

enum class DenseType : int { f32 = 0, bf16 = 1 };

inline constexpr int kDenseGemvBatch = 4;  // rows of x sharing one pass over the weights

// y[b][r] = Σ_c w[r][c] · x[b][c] for b < batch, r < n, c < k. w: n × k of `type`, row-major,
// 16-byte aligned; x rows ldx floats apart, y rows ldy floats apart. Any batch >= 0.
void dense_gemv(const void* w, DenseType type, int n, int k, const float* x, int ldx, int batch, float* y, int ldy,
                void* stream);

// Job j: y[j][r] = Σ_c W_{ids[j]}[r][c] · x[j / x_group][c], where matrix m of the stack starts
// m · n · k elements after w. x rows are k floats apart, y rows n. ids: device int32 [jobs],
// each in [0, matrices) (checked by the caller when the ids are made).
void dense_gemv_indexed(const void* w, DenseType type, int n, int k, const int32_t* ids, int jobs, const float* x,
                        int x_group, float* y, void* stream);

// fp32 sums in another order than the twin's double sums.
inline constexpr double dense_gemv_max_nmse = 1e-10;

}  // namespace aff::gpu
