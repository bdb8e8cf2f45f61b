// RMSNorm kernels (declarations and contract in rms_norm.hpp): one block of 256 threads per
// row; the sum of squares is reduced in the block, then each thread scales its own elements,
// so in-place use is safe. rms_norm_rope: the same norm, then the row's rotary pairs rotated as
// rope.hip does, each pair by one thread that normalises both of its channels (no other
// thread writes them), in the same float operations as the two kernels one after the other.
#include "kernels/rms_norm.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

// 1 / sqrt(mean(x²) + eps) over row xr's n values; every thread of the block gets it.
__device__ inline float inverse_rms(const float* __restrict__ xr, int n, float eps, float* scratch) {
    float ss = 0.0f;
    for (int i = dev::thread_x(); i < n; i += kThreads) ss += xr[i] * xr[i];
    const float total = dev::block_sum<kThreads>(ss, scratch);
    return 1.0f / sqrtf(total / static_cast<float>(n) + eps);
}

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                            float* y, int n, float eps) {
    __shared__ float scratch[kThreads / kWarp];
    const unsigned row = dev::block_x();
    const float* xr = x + static_cast<size_t>(row) * n;
    float* yr = y + static_cast<size_t>(row) * n;
    const float inv = inverse_rms(xr, n, eps, scratch);
    for (int i = dev::thread_x(); i < n; i += kThreads) {
        const float v = xr[i] * inv;
        yr[i] = w ? v * w[i] : v;
    }
}

// Row r is vector r % vecs of token r / vecs; its last 2·pairs channels are rotated.
__global__ void __launch_bounds__(kThreads) rms_norm_rope_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                                 float* y, int n, float eps,
                                                                 const int32_t* __restrict__ positions, int vecs,
                                                                 RopeTable table, float sign) {
    __shared__ float scratch[kThreads / kWarp];
    const unsigned row = dev::block_x();
    const float* xr = x + static_cast<size_t>(row) * n;
    float* yr = y + static_cast<size_t>(row) * n;
    const float inv = inverse_rms(xr, n, eps, scratch);
    const int first = n - 2 * table.pairs;  // the rotary channels
    for (int i = dev::thread_x(); i < first; i += kThreads) {
        const float v = xr[i] * inv;
        yr[i] = w ? v * w[i] : v;
    }
    const int t = static_cast<int>(row) / vecs;
    for (int j = dev::thread_x(); j < table.pairs; j += kThreads) {
        const int i = first + 2 * j;
        const float v0 = xr[i] * inv, v1 = xr[i + 1] * inv;
        const float even = w ? v0 * w[i] : v0, odd = w ? v1 * w[i + 1] : v1;
        const float angle = static_cast<float>(positions[t]) * table.theta[j];
        float s, c;
        sincosf(angle, &s, &c);
        s *= sign;
        yr[i] = fmaf(even, c, -(odd * s));  // as rope.hip, to the bit
        yr[i + 1] = fmaf(even, s, odd * c);
    }
}

}  // namespace

void rms_norm_rope(const float* x, const float* w, float* y, int tokens, int vecs, int n, float eps,
                   const int32_t* positions, const RopeTable& table, bool inverse, void* stream) {
    if (tokens < 0 || vecs <= 0 || n <= 0) throw_argument("rms_norm_rope", "tokens must be >= 0, vecs and n > 0");
    if (table.pairs <= 0 || table.pairs > kRopeMaxPairs || 2 * table.pairs > n)
        throw_argument("rms_norm_rope", "rotary pairs must be in 1..64 and fit the vector");
    const long long rows = static_cast<long long>(tokens) * vecs;
    if (rows == 0) return;
    rms_norm_rope_kernel<<<dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        x, w, y, n, eps, positions, vecs, table, inverse ? -1.0f : 1.0f);
    AFF_GPU_CHECK(hipGetLastError());
}

void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps, void* stream) {
    if (rows < 0 || n <= 0) throw_argument("rms_norm", "rows must be >= 0 and n > 0");
    if (rows == 0) return;
    rms_norm_kernel<<<dim3(rows), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(x, w, y, n, eps);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
