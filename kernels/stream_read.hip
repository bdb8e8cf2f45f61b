// The streaming read (contract in stream_read.hpp): grid-stride loop, four independent
// 16-byte loads in flight per thread; the xor keeps the loads alive, the impossible-looking
// store keeps the compiler from dropping them.
#include "kernels/stream_read.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

__global__ void __launch_bounds__(256) stream_read_kernel(const uint4* __restrict__ p, size_t n16, uint32_t* sink,
                                                          size_t stride) {
    size_t i = static_cast<size_t>(dev::block_x()) * 256 + dev::thread_x();
    uint32_t acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const uint4 a = dev::load_stream(p + i), b = dev::load_stream(p + i + stride),
                    c = dev::load_stream(p + i + 2 * stride), d = dev::load_stream(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        const uint4 a = dev::load_stream(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

}  // namespace

void stream_read(const void* p, size_t n16, uint32_t* sink, unsigned blocks, void* stream) {
    if (blocks == 0) throw_argument("stream_read", "blocks must be > 0");
    stream_read_kernel<<<dim3(blocks), dim3(256), 0, static_cast<hipStream_t>(stream)>>>(
        static_cast<const uint4*>(p), n16, sink, static_cast<size_t>(blocks) * 256);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
