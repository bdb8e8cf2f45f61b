// Row argmax (contract in argmax.hpp): one block of 1024 threads per row. Each thread scans a
// strided slice for its best (value, id), larger value then lower id, NaN skipped; warp
// shuffles and a shared-memory pass reduce them with the same order, so the winner is the
// lowest id of the largest value, as the host's sequential scan finds it. A NaN at id 0 is
// the host's one other case (its scan never leaves id 0): checked last.
#include "kernels/argmax.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 1024;
constexpr int kNone = 0x7fffffff;  // an id no row has: loses every tie

__device__ inline bool better(float v, int id, float best, int best_id) {
    return v > best || (v == best && id < best_id);
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ x, int cols, long long stride,
                                                          int32_t* out, int32_t* copy) {
    __shared__ float red_v[kThreads / kWarp];
    __shared__ int red_id[kThreads / kWarp];
    const int r = static_cast<int>(dev::block_x());
    const int tid = static_cast<int>(dev::thread_x());
    const float* row = x + static_cast<long long>(r) * stride;
    float best = -__builtin_huge_valf();
    int best_id = kNone;
    for (int i = tid; i < cols; i += kThreads) {
        const float v = row[i];
        if (v == v && better(v, i, best, best_id)) {  // v == v: not NaN
            best = v;
            best_id = i;
        }
    }
#pragma unroll
    for (int m = kWarp / 2; m > 0; m /= 2) {
        const float ov = dev::shfl_xor(best, m);
        const int oid = dev::shfl_xor(best_id, m);
        if (better(ov, oid, best, best_id)) {
            best = ov;
            best_id = oid;
        }
    }
    if (dev::lane_id() == 0) {
        red_v[tid / kWarp] = best;
        red_id[tid / kWarp] = best_id;
    }
    dev::sync_block();
    if (tid == 0) {
        float b = red_v[0];
        int bid = red_id[0];
        for (int w = 1; w < kThreads / kWarp; ++w)
            if (better(red_v[w], red_id[w], b, bid)) {
                b = red_v[w];
                bid = red_id[w];
            }
        const float first = row[0];
        if (bid == kNone || first != first) bid = 0;  // every value NaN, or the host never leaves a NaN id 0
        out[r] = bid;
        if (copy) copy[r] = bid;
    }
}

}  // namespace

void argmax_rows(const float* x, int rows, int cols, long long stride, int32_t* out, void* stream, int32_t* copy) {
    if (rows < 0 || cols < 1 || stride < cols) throw_argument("argmax_rows", "rows >= 0, cols >= 1, stride >= cols");
    if (rows == 0) return;
    argmax_kernel<<<dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        x, cols, stride, out, copy);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
