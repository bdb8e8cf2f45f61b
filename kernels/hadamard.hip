// Hadamard rotation kernel (declaration and contract in hadamard.hpp): one block of 256
// threads per vector. The vector is loaded into shared memory with its signs applied, the
// log2(n) butterfly stages run as quant::rotate's loops do (len = 1, 2, 4, ...; a pair
// (j, j + len) becomes (a + b, a − b)), each stage's n/2 pairs spread over the threads with a
// barrier between stages, then the scaled result is written out. The scale is computed on
// the host with quant::rotate's expression, so the two agree bit for bit.
#include "kernels/hadamard.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

#include <cmath>

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

// formats/quant-codebook.md §5: the sign of column i is the top bit of splitmix64's mix of
// 0x616666726f746174 + i · 0x9E3779B97F4A7C15 (libaff/quant/rotation.cpp, core/hash.hpp).
__device__ inline float column_sign(uint64_t i) {
    uint64_t x = 0x616666726f746174ull + i * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x = x ^ (x >> 31);
    return (x >> 63) ? -1.0f : 1.0f;
}

__global__ void __launch_bounds__(kThreads) hadamard_kernel(const float* x, int ldx, float* y, int ldy, int n,
                                                            float scale) {
    extern __shared__ float v[];
    const unsigned b = dev::block_x();
    const float* xr = x + static_cast<size_t>(b) * ldx;
    float* yr = y + static_cast<size_t>(b) * ldy;
    for (int i = dev::thread_x(); i < n; i += kThreads) v[i] = xr[i] * column_sign(static_cast<uint64_t>(i));
    dev::sync_block();
    for (int len = 1; len < n; len <<= 1) {
        // Pair p: its block of 2·len starts at (p / len) · 2·len, offset p % len.
        for (int p = dev::thread_x(); p < n / 2; p += kThreads) {
            const int j = (p / len) * 2 * len + p % len;
            const float a = v[j], c = v[j + len];
            v[j] = a + c;
            v[j + len] = a - c;
        }
        dev::sync_block();
    }
    for (int i = dev::thread_x(); i < n; i += kThreads) yr[i] = v[i] * scale;
}

}  // namespace

void hadamard_rotate(const float* x, int ldx, float* y, int ldy, int n, int batch, void* stream) {
    if (n < 2 || n > kHadamardMaxN || (n & (n - 1)) != 0)
        throw_argument("hadamard_rotate", "n must be a power of two in [2, 8192]");
    if (batch < 0 || ldx < n || ldy < n) throw_argument("hadamard_rotate", "batch must be >= 0 and ldx, ldy >= n");
    if (x == y && ldx != ldy) throw_argument("hadamard_rotate", "in place needs ldx == ldy");
    if (batch == 0) return;
    const float scale = 1.0f / std::sqrt(static_cast<float>(n));  // quant::rotate's norm
    hadamard_kernel<<<dim3(batch), dim3(kThreads), static_cast<size_t>(n) * sizeof(float),
                      static_cast<hipStream_t>(stream)>>>(x, ldx, y, ldy, n, scale);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
