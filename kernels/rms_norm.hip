// RMSNorm kernels (declarations and contract in rms_norm.hpp): one block of 256 threads per
// row; the sum of squares is reduced in the block, then each thread scales its own elements,
// so in-place use is safe.
#include "kernels/rms_norm.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                            float* y, int n, float eps) {
    __shared__ float scratch[kThreads / kWarp];
    const unsigned row = dev::block_x();
    const float* xr = x + static_cast<size_t>(row) * n;
    float* yr = y + static_cast<size_t>(row) * n;
    float ss = 0.0f;
    for (int i = dev::thread_x(); i < n; i += kThreads) ss += xr[i] * xr[i];
    const float total = dev::block_sum<kThreads>(ss, scratch);
    const float inv = 1.0f / sqrtf(total / static_cast<float>(n) + eps);
    for (int i = dev::thread_x(); i < n; i += kThreads) {
        const float v = xr[i] * inv;
        yr[i] = w ? v * w[i] : v;
    }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps, void* stream) {
    if (rows < 0 || n <= 0) throw_argument("rms_norm", "rows must be >= 0 and n > 0");
    if (rows == 0) return;
    rms_norm_kernel<<<dim3(rows), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(x, w, y, n, eps);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
