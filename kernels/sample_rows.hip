// Row sampling (contract in sample_rows.hpp): one block of 1024 threads a row. The maximum
// first (for exp's range), then each thread sums exp((x - max) / T) over its own contiguous
// chunk of ids, thread 0 turns the chunk sums into running sums in chunk order, and the one
// chunk whose running interval holds u·Σ scans its ids in order for the draw. The chunk's own
// sum is the one it scans against, so exactly one id of q > 0 is found; where rounding puts
// u·Σ at or past the last running sum, the draw is the row's largest value (q > 0 there).
#include "kernels/sample_rows.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 1024;

__device__ inline float weight(float v, float max, float inv_t) {
    return v == v ? expf((v - max) * inv_t) : 0.0f;  // NaN: no mass
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* __restrict__ x, int cols, long long stride,
                                                          float inv_t, const float* __restrict__ u, int32_t* out,
                                                          float* q_out, int32_t* copy) {
    __shared__ float red_v[kThreads / kWarp];
    __shared__ int red_id[kThreads / kWarp];
    __shared__ float running[kThreads + 1];
    __shared__ int picked;
    const int r = static_cast<int>(dev::block_x());
    const int tid = static_cast<int>(dev::thread_x());
    const float* row = x + static_cast<long long>(r) * stride;

    // The largest value and its lowest id (NaN skipped).
    float best = -__builtin_huge_valf();
    int best_id = 0x7fffffff;
    for (int i = tid; i < cols; i += kThreads) {
        const float v = row[i];
        if (v == v && (v > best || (v == best && i < best_id))) {
            best = v;
            best_id = i;
        }
    }
#pragma unroll
    for (int m = kWarp / 2; m > 0; m /= 2) {
        const float ov = dev::shfl_xor(best, m);
        const int oid = dev::shfl_xor(best_id, m);
        if (ov > best || (ov == best && oid < best_id)) {
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
            if (red_v[w] > b || (red_v[w] == b && red_id[w] < bid)) {
                b = red_v[w];
                bid = red_id[w];
            }
        red_v[0] = b;
        red_id[0] = bid;
        picked = -1;
    }
    dev::sync_block();
    const float max = red_v[0];
    const int max_id = red_id[0];
    if (max_id == 0x7fffffff || max == -__builtin_huge_valf()) {  // every value NaN or -inf: id 0, q one-hot there
        if (tid == 0) {
            out[r] = 0;
            if (copy) copy[r] = 0;
        }
        if (q_out)
            for (int i = tid; i < cols; i += kThreads) q_out[static_cast<long long>(r) * cols + i] = i == 0 ? 1.0f : 0.0f;
        return;
    }

    // Each thread's chunk sum, then the running sums in chunk order.
    const int chunk = (cols + kThreads - 1) / kThreads;
    const int begin = tid * chunk, end = min(cols, begin + chunk);
    float own = 0.0f;
    for (int i = begin; i < end; ++i) own += weight(row[i], max, inv_t);
    running[tid + 1] = own;
    dev::sync_block();
    if (tid == 0) {
        running[0] = 0.0f;
        for (int t = 1; t <= kThreads; ++t) running[t] += running[t - 1];
    }
    dev::sync_block();
    const float total = running[kThreads];
    const float target = u[r] * total;
    if (own > 0.0f && running[tid] <= target && target < running[tid + 1]) {
        const float local = target - running[tid];
        float sum = 0.0f;
        int id = -1, last = -1;
        for (int i = begin; i < end; ++i) {
            const float w = weight(row[i], max, inv_t);
            if (w > 0.0f) last = i;
            sum += w;
            if (sum > local && w > 0.0f) {
                id = i;
                break;
            }
        }
        picked = id >= 0 ? id : last;  // one chunk holds the target
    }
    dev::sync_block();
    if (tid == 0) {
        const int id = picked >= 0 ? picked : max_id;
        out[r] = id;
        if (copy) copy[r] = id;
    }
    if (q_out) {
        const float inv_total = 1.0f / total;
        for (int i = tid; i < cols; i += kThreads)
            q_out[static_cast<long long>(r) * cols + i] = weight(row[i], max, inv_t) * inv_total;
    }
}

}  // namespace

void sample_rows(const float* x, int rows, int cols, long long stride, float temperature, const float* u,
                 int32_t* out, float* q_out, void* stream, int32_t* copy) {
    if (rows < 0 || cols < 1 || stride < cols || !(temperature > 0.0f))
        throw_argument("sample_rows", "rows >= 0, cols >= 1, stride >= cols, temperature > 0");
    if (rows == 0) return;
    sample_kernel<<<dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        x, cols, stride, 1.0f / temperature, u, out, q_out, copy);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
