// Row sampling (contract in sample_rows.hpp): one block of kDrawThreads threads a row, the
// maximum first (for exp's range), then the draw from exp((x - max) / T) by block_draw
// (block_draw.hpp: running sums of per-thread chunks in a fixed order), and q's row written
// beside it.
#include "kernels/sample_rows.hpp"

#include "kernels/block_draw.hpp"
#include "kernels/check.hpp"

namespace aff::gpu {
namespace {

__global__ void __launch_bounds__(kDrawThreads) sample_kernel(const float* __restrict__ x, int cols, long long stride,
                                                              float inv_t, const float* __restrict__ u, int32_t* out,
                                                              float* q_out, int32_t* copy) {
    __shared__ DrawShared sh;
    const int r = static_cast<int>(dev::block_x());
    const int tid = static_cast<int>(dev::thread_x());
    const float* row = x + static_cast<long long>(r) * stride;
    float max;
    int max_id;
    block_row_max(row, cols, sh, max, max_id);
    if (max_id == kNoId || max == -__builtin_huge_valf()) {  // every value NaN or -inf: id 0, q one-hot there
        if (tid == 0) {
            out[r] = 0;
            if (copy) copy[r] = 0;
        }
        if (q_out)
            for (int i = tid; i < cols; i += kDrawThreads) q_out[static_cast<long long>(r) * cols + i] = i == 0 ? 1.0f : 0.0f;
        return;
    }
    double total = 0.0;
    const int picked = block_draw([&](int i) { return tempered_weight(row[i], max, inv_t); }, cols, u[r], sh, &total);
    if (tid == 0) {
        const int id = picked >= 0 ? picked : max_id;  // the maximum's weight is 1: never -1, kept as a guard
        out[r] = id;
        if (copy) copy[r] = id;
    }
    if (q_out) {
        const float inv_total = float(1.0 / total);
        for (int i = tid; i < cols; i += kDrawThreads)
            q_out[static_cast<long long>(r) * cols + i] = tempered_weight(row[i], max, inv_t) * inv_total;
    }
}

}  // namespace

void sample_rows(const float* x, int rows, int cols, long long stride, float temperature, const float* u,
                 int32_t* out, float* q_out, void* stream, int32_t* copy) {
    if (rows < 0 || cols < 1 || stride < cols || !(temperature > 0.0f))
        throw_argument("sample_rows", "rows >= 0, cols >= 1, stride >= cols, temperature > 0");
    if (rows == 0) return;
    sample_kernel<<<dim3(static_cast<unsigned>(rows)), dim3(kDrawThreads), 0, static_cast<hipStream_t>(stream)>>>(
        x, cols, stride, 1.0f / temperature, u, out, q_out, copy);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
