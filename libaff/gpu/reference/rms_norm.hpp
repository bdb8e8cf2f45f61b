// CPU twin of kernels/rms_norm.hip: the same function in plain C++ (sums in double), the
// oracle tests/gpu and aff-gpucheck compare the GPU against. Lives beside the GPU code until
// the CPU forward (libaff/model) and these twins are unified.
#pragma once

namespace aff::cpu {

// Same contract as aff::gpu::rms_norm (kernels/rms_norm.hpp), host pointers.
void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps);

}  // namespace aff::cpu
