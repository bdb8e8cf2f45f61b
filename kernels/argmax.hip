// Row argmax (contract in argmax.hpp): one block of kDrawThreads threads per row, the winner
// block_row_max's (kernels/block_draw.hpp: larger value then lower id, NaN skipped, the same
// order as the host's sequential scan), so the lowest id of the largest value. A NaN at id 0 is
// the host's one other case (its scan never leaves id 0): checked last.
#include "kernels/argmax.hpp"

#include "kernels/block_draw.hpp"
#include "kernels/check.hpp"

namespace aff::gpu {
namespace {

__global__ void __launch_bounds__(kDrawThreads) argmax_kernel(const float* __restrict__ x, int cols, long long stride,
                                                              int32_t* out, int32_t* copy) {
    __shared__ MaxShared sh;
    const int r = static_cast<int>(dev::block_x());
    const float* row = x + static_cast<long long>(r) * stride;
    float max;
    int id;
    block_row_max(row, cols, sh, max, id);
    if (dev::thread_x() == 0) {
        const float first = row[0];
        if (id == kNoId || first != first) id = 0;  // every value NaN, or the host never leaves a NaN id 0
        out[r] = id;
        if (copy) copy[r] = id;
    }
}

}  // namespace

void argmax_rows(const float* x, int rows, int cols, long long stride, int32_t* out, void* stream, int32_t* copy) {
    if (rows < 0 || cols < 1 || stride < cols) throw_argument("argmax_rows", "rows >= 0, cols >= 1, stride >= cols");
    if (rows == 0) return;
    argmax_kernel<<<dim3(static_cast<unsigned>(rows)), dim3(kDrawThreads), 0, static_cast<hipStream_t>(stream)>>>(
        x, cols, stride, out, copy);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
