// Dense GEMV kernels (contract in dense_gemv.hpp). One warp per output row: the lanes walk the
// row in 16-byte loads (8 bf16 or 4 f32) when the row length allows, element by element
// otherwise, and reduce with shuffles. The plain form keeps up to kDenseGemvBatch rows of x
// per block so each weight is read once per chunk; the indexed form has one job per block row.
#include "kernels/dense_gemv.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;

__device__ inline float bf16_to_float(uint32_t bits16) { return dev::bits_to_float(bits16 << 16); }

// acc[b] += Σ over this lane's share of w_row · x_b, for b < batch (batch <= kDenseGemvBatch).
template <DenseType kType>
__device__ inline void row_dot(const void* w_row, int k, const float* x, int ldx, int batch,
                               float (&acc)[kDenseGemvBatch]) {
    const int lane = static_cast<int>(dev::lane_id());
    if (kType == DenseType::bf16) {
        const uint16_t* w = static_cast<const uint16_t*>(w_row);
        if (k % 8 == 0) {
            const uint4* w8 = reinterpret_cast<const uint4*>(w);
            for (int i = lane; i < k / 8; i += kWarp) {
                const uint4 v = dev::load_stream(w8 + i);
                const uint32_t words[4] = {v.x, v.y, v.z, v.w};
                float f[8];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    f[2 * j] = bf16_to_float(words[j] & 0xffffu);
                    f[2 * j + 1] = bf16_to_float(words[j] >> 16);
                }
#pragma unroll
                for (int b = 0; b < kDenseGemvBatch; ++b) {
                    if (b >= batch) break;
                    const float* xb = x + static_cast<size_t>(b) * ldx + 8 * i;
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[b] += f[j] * xb[j];
                }
            }
        } else {
            for (int c = lane; c < k; c += kWarp) {
                const float f = bf16_to_float(w[c]);
                for (int b = 0; b < batch; ++b) acc[b] += f * x[static_cast<size_t>(b) * ldx + c];
            }
        }
    } else {
        const float* w = static_cast<const float*>(w_row);
        if (k % 4 == 0) {
            const uint4* w4 = reinterpret_cast<const uint4*>(w);
            for (int i = lane; i < k / 4; i += kWarp) {
                const uint4 v = dev::load_stream(w4 + i);
                const float f[4] = {dev::bits_to_float(v.x), dev::bits_to_float(v.y), dev::bits_to_float(v.z),
                                    dev::bits_to_float(v.w)};
#pragma unroll
                for (int b = 0; b < kDenseGemvBatch; ++b) {
                    if (b >= batch) break;
                    const float* xb = x + static_cast<size_t>(b) * ldx + 4 * i;
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[b] += f[j] * xb[j];
                }
            }
        } else {
            for (int c = lane; c < k; c += kWarp) {
                const float f = w[c];
                for (int b = 0; b < batch; ++b) acc[b] += f * x[static_cast<size_t>(b) * ldx + c];
            }
        }
    }
}

template <DenseType kType>
__host__ __device__ constexpr size_t type_bytes() {
    return kType == DenseType::bf16 ? 2 : 4;
}

// Block (row group, batch chunk): warp w computes row blockIdx.x · 8 + w for the chunk's rows of x.
template <DenseType kType>
__global__ void __launch_bounds__(kThreads) dense_gemv_kernel(const void* __restrict__ w, int n, int k,
                                                              const float* __restrict__ x, int ldx, int batch,
                                                              float* __restrict__ y, int ldy) {
    const int r = static_cast<int>(dev::block_x()) * kRowsPerBlock + static_cast<int>(dev::thread_x() / kWarp);
    const int b0 = static_cast<int>(dev::block_y()) * kDenseGemvBatch;
    if (r >= n) return;  // whole warps leave together: r is uniform in a warp
    const int nb = batch - b0 < kDenseGemvBatch ? batch - b0 : kDenseGemvBatch;
    float acc[kDenseGemvBatch] = {0.0f, 0.0f, 0.0f, 0.0f};
    const char* row = static_cast<const char*>(w) + static_cast<size_t>(r) * k * type_bytes<kType>();
    row_dot<kType>(row, k, x + static_cast<size_t>(b0) * ldx, ldx, nb, acc);
#pragma unroll
    for (int b = 0; b < kDenseGemvBatch; ++b) acc[b] = dev::warp_sum(acc[b]);
    if (dev::lane_id() == 0)
        for (int b = 0; b < nb; ++b) y[static_cast<size_t>(b0 + b) * ldy + r] = acc[b];
}

template <DenseType kType>
__global__ void __launch_bounds__(kThreads) dense_gemv_indexed_kernel(const void* __restrict__ w, int n, int k,
                                                                      const int32_t* __restrict__ ids,
                                                                      const float* __restrict__ x, int x_group,
                                                                      float* __restrict__ y) {
    const int r = static_cast<int>(dev::block_x()) * kRowsPerBlock + static_cast<int>(dev::thread_x() / kWarp);
    const int job = static_cast<int>(dev::block_y());
    if (r >= n) return;
    const size_t matrix = static_cast<size_t>(ids[job]);
    const char* row = static_cast<const char*>(w) + (matrix * n + r) * k * type_bytes<kType>();
    float acc[kDenseGemvBatch] = {0.0f, 0.0f, 0.0f, 0.0f};
    row_dot<kType>(row, k, x + static_cast<size_t>(job / x_group) * k, k, 1, acc);
    acc[0] = dev::warp_sum(acc[0]);
    if (dev::lane_id() == 0) y[static_cast<size_t>(job) * n + r] = acc[0];
}

void check_shape(const char* kernel, const void* w, int n, int k) {
    if (n <= 0 || k <= 0) throw_argument(kernel, "n and k must be positive");
    if (reinterpret_cast<uintptr_t>(w) % 16 != 0) throw_argument(kernel, "weights must be 16-byte aligned");
}

}  // namespace

void dense_gemv(const void* w, DenseType type, int n, int k, const float* x, int ldx, int batch, float* y, int ldy,
                void* stream) {
    check_shape("dense_gemv", w, n, k);
    if (batch < 0) throw_argument("dense_gemv", "batch must be >= 0");
    if (ldx < k || ldy < n) throw_argument("dense_gemv", "row strides must cover k inputs and n outputs");
    if (batch == 0) return;
    const dim3 grid((n + kRowsPerBlock - 1) / kRowsPerBlock, (batch + kDenseGemvBatch - 1) / kDenseGemvBatch);
    const auto s = static_cast<hipStream_t>(stream);
    if (type == DenseType::bf16)
        dense_gemv_kernel<DenseType::bf16><<<grid, dim3(kThreads), 0, s>>>(w, n, k, x, ldx, batch, y, ldy);
    else
        dense_gemv_kernel<DenseType::f32><<<grid, dim3(kThreads), 0, s>>>(w, n, k, x, ldx, batch, y, ldy);
    AFF_GPU_CHECK(hipGetLastError());
}

void dense_gemv_indexed(const void* w, DenseType type, int n, int k, const int32_t* ids, int jobs, const float* x,
                        int x_group, float* y, void* stream) {
    check_shape("dense_gemv_indexed", w, n, k);
    if (jobs < 0 || x_group < 1) throw_argument("dense_gemv_indexed", "jobs must be >= 0 and x_group >= 1");
    if (jobs == 0) return;
    const dim3 grid((n + kRowsPerBlock - 1) / kRowsPerBlock, jobs);
    const auto s = static_cast<hipStream_t>(stream);
    if (type == DenseType::bf16)
        dense_gemv_indexed_kernel<DenseType::bf16><<<grid, dim3(kThreads), 0, s>>>(w, n, k, ids, x, x_group, y);
    else
        dense_gemv_indexed_kernel<DenseType::f32><<<grid, dim3(kThreads), 0, s>>>(w, n, k, ids, x, x_group, y);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
