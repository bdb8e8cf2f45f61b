// Embedding gather (contract in embed.hpp): one thread per output element.
#include "kernels/embed.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

template <DenseType kType>
__global__ void __launch_bounds__(kThreads) embed_kernel(const void* __restrict__ table, int dim,
                                                         const int32_t* __restrict__ tokens, int copies,
                                                         long long total, float* __restrict__ out) {
    const long long i = static_cast<long long>(dev::block_x()) * kThreads + dev::thread_x();
    if (i >= total) return;
    const int d = static_cast<int>(i % dim);
    const long long t = i / dim / copies;
    const size_t at = static_cast<size_t>(tokens[t]) * dim + d;
    out[i] = kType == DenseType::bf16
                 ? dev::bits_to_float(static_cast<uint32_t>(static_cast<const uint16_t*>(table)[at]) << 16)
                 : static_cast<const float*>(table)[at];
}

}  // namespace

void embed(const void* table, DenseType type, int dim, const int32_t* tokens, int n, int copies, float* out,
           void* stream) {
    if (dim <= 0 || n < 0 || copies < 1) throw_argument("embed", "dim must be > 0, n >= 0 and copies >= 1");
    const long long total = static_cast<long long>(n) * copies * dim;
    if (total == 0) return;
    const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
    const auto s = static_cast<hipStream_t>(stream);
    if (type == DenseType::bf16)
        embed_kernel<DenseType::bf16><<<dim3(blocks), dim3(kThreads), 0, s>>>(table, dim, tokens, copies, total, out);
    else
        embed_kernel<DenseType::f32><<<dim3(blocks), dim3(kThreads), 0, s>>>(table, dim, tokens, copies, total, out);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
