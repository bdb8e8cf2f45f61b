// SwiGLU and MoE combine kernels (contract in swiglu.hpp): one thread per output element.
#include "kernels/swiglu.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) swiglu_kernel(const float* gate, const float* up, long long count,
                                                          float limit, float* out) {
    const long long i = static_cast<long long>(dev::block_x()) * kThreads + dev::thread_x();
    if (i >= count) return;
    const float g = fminf(gate[i], limit);
    const float u = fmaxf(fminf(up[i], limit), -limit);
    out[i] = g / (1.0f + expf(-g)) * u;
}

__global__ void __launch_bounds__(kThreads) moe_combine_kernel(const float* __restrict__ routed,
                                                               const float* __restrict__ weights, int k, int dim,
                                                               const float* __restrict__ shared, long long total,
                                                               float* __restrict__ out) {
    const long long i = static_cast<long long>(dev::block_x()) * kThreads + dev::thread_x();
    if (i >= total) return;
    const long long t = i / dim;
    const int d = static_cast<int>(i % dim);
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc += routed[(t * k + j) * dim + d] * weights[t * k + j];
    if (shared) acc += shared[i];
    out[i] = acc;
}

}  // namespace

void swiglu(const float* gate, const float* up, long long count, float limit, float* out, void* stream) {
    if (count < 0) throw_argument("swiglu", "count must be >= 0");
    if (count == 0) return;
    const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
    swiglu_kernel<<<dim3(blocks), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(gate, up, count, limit, out);
    AFF_GPU_CHECK(hipGetLastError());
}

void moe_combine(const float* routed, const float* weights, int tokens, int k, int dim, const float* shared,
                 float* out, void* stream) {
    if (tokens < 0 || k < 0 || dim <= 0) throw_argument("moe_combine", "tokens, k must be >= 0 and dim > 0");
    const long long total = static_cast<long long>(tokens) * dim;
    if (total == 0) return;
    const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
    moe_combine_kernel<<<dim3(blocks), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        routed, weights, k, dim, shared, total, out);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
