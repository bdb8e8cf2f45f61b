// RoPE kernel (declarations and contract in rope.hpp): one thread per rotated pair; the θ
// table arrives by value in the kernel parameters, so no table lives in device memory.
#include "kernels/rope.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rope_kernel(float* x, const int32_t* __restrict__ positions, int vecs,
                                                        int dim, RopeTable table, float sign, long long pairs_total) {
    const long long i = static_cast<long long>(dev::block_x()) * kThreads + dev::thread_x();
    if (i >= pairs_total) return;
    const int j = static_cast<int>(i % table.pairs);
    const long long vec = i / table.pairs;          // token · vecs + v
    const int t = static_cast<int>(vec / vecs);
    float* p = x + vec * dim + (dim - 2 * table.pairs) + 2 * j;
    const float angle = static_cast<float>(positions[t]) * table.theta[j];
    float s, c;
    sincosf(angle, &s, &c);
    s *= sign;
    const float even = p[0], odd = p[1];
    // Explicit fmaf: the rotation rounds the same way wherever it is compiled (rms_norm_rope
    // repeats it; left to the compiler, the two kernels contracted it differently).
    p[0] = fmaf(even, c, -(odd * s));
    p[1] = fmaf(even, s, odd * c);
}

}  // namespace

void rope(float* x, const int32_t* positions, int tokens, int vecs, int dim, const RopeTable& table, bool inverse,
          void* stream) {
    if (table.pairs <= 0 || table.pairs > kRopeMaxPairs || 2 * table.pairs > dim)
        throw_argument("rope", "rotary pairs must be in 1..64 and fit the vector");
    if (tokens < 0 || vecs <= 0) throw_argument("rope", "tokens must be >= 0 and vecs > 0");
    const long long total = static_cast<long long>(tokens) * vecs * table.pairs;
    if (total == 0) return;
    const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
    rope_kernel<<<dim3(blocks), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        x, positions, vecs, dim, table, inverse ? -1.0f : 1.0f, total);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
