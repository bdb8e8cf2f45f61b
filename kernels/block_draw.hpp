// Device code shared by the row kernels (argmax.hip, sample_rows.hip, speculative_rows.hip):
// one block of kDrawThreads threads works one row. The steps a pick needs, written once so
// that a draft's guess and the trunk's pick follow the same arithmetic:
//   - block_row_max: the row's largest value and its lowest id (NaN skipped): the greedy pick,
//     and the shift that keeps exp in range;
//   - tempered_weight: exp((x - max) / T), NaN no mass;
//   - block_draw: the first id, in id order, whose running sum of weight(i) passes u·Σ weight
//     (a draw from the weights when u is uniform in [0, 1)), never an id of weight 0. Each
//     thread sums its own contiguous chunk of ids, thread 0 turns the chunk sums into running
//     sums in chunk order, and the one chunk whose interval holds the target scans its ids in
//     order; the chunk's own sum is the one it scans against, so exactly one id of weight > 0
//     is found. The sums go in a fixed order (the same row and u give the same id) and in
//     double: in float, the error of Σ over 129 280 ids moved every running sum together by
//     a few 1e-6 of the total, enough to move a residual's draw (p - q, often a small part of
//     the total) by more than 1e-5 in u.
// Include only from .hip files (device code).
#pragma once

#include "kernels/device_common.hpp"

namespace aff::gpu {

constexpr int kDrawThreads = 1024;

// Scratch of block_row_max, and of a draw (which needs the maximum first), in shared memory.
struct MaxShared {
    float red_v[kDrawThreads / kWarp];
    int red_id[kDrawThreads / kWarp];
};
struct DrawShared : MaxShared {
    double running[kDrawThreads + 1];
    int picked;
};

constexpr int kNoId = 0x7fffffff;

// The largest value of row[0, cols) and its lowest id, for every thread of the block; id kNoId
// (and -inf) when every value is NaN.
__device__ inline void block_row_max(const float* row, int cols, MaxShared& sh, float& max, int& max_id) {
    const int tid = static_cast<int>(dev::thread_x());
    float best = -__builtin_huge_valf();
    int best_id = kNoId;
    for (int i = tid; i < cols; i += kDrawThreads) {
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
        sh.red_v[tid / kWarp] = best;
        sh.red_id[tid / kWarp] = best_id;
    }
    dev::sync_block();
    if (tid == 0) {
        float b = sh.red_v[0];
        int bid = sh.red_id[0];
        for (int w = 1; w < kDrawThreads / kWarp; ++w)
            if (sh.red_v[w] > b || (sh.red_v[w] == b && sh.red_id[w] < bid)) {
                b = sh.red_v[w];
                bid = sh.red_id[w];
            }
        sh.red_v[0] = b;
        sh.red_id[0] = bid;
    }
    dev::sync_block();
    max = sh.red_v[0];
    max_id = sh.red_id[0];
    dev::sync_block();  // red_v/red_id are free again
}

__device__ inline float tempered_weight(float v, float max, float inv_t) {
    return v == v ? expf((v - max) * inv_t) : 0.0f;  // NaN: no mass
}

// The draw by u in [0, 1) from weight(i) >= 0 over ids [0, cols), for every thread of the block;
// -1 when every weight is 0. total receives Σ weight (the running sums' end).
template <class Weight>
__device__ inline int block_draw(Weight weight, int cols, float u, DrawShared& sh, double* total_out = nullptr) {
    const int tid = static_cast<int>(dev::thread_x());
    const int chunk = (cols + kDrawThreads - 1) / kDrawThreads;
    const int begin = tid * chunk, end = min(cols, begin + chunk);
    double own = 0.0;
    for (int i = begin; i < end; ++i) own += weight(i);
    sh.running[tid + 1] = own;
    if (tid == 0) sh.picked = -1;
    dev::sync_block();
    if (tid == 0) {
        sh.running[0] = 0.0;
        for (int t = 1; t <= kDrawThreads; ++t) sh.running[t] += sh.running[t - 1];
    }
    dev::sync_block();
    const double total = sh.running[kDrawThreads];
    // u < 1, but u·Σ may round up to Σ: then the draw is in the last chunk of any weight.
    const double target = fmin(double(u) * total, nextafter(total, 0.0));
    if (own > 0.0 && sh.running[tid] <= target && target < sh.running[tid + 1]) {
        const double local = target - sh.running[tid];
        double sum = 0.0;
        int id = -1, last = -1;
        for (int i = begin; i < end; ++i) {
            const float w = weight(i);
            if (w > 0.0f) last = i;
            sum += w;
            if (sum > local && w > 0.0f) {
                id = i;
                break;
            }
        }
        sh.picked = id >= 0 ? id : last;  // one chunk holds the target
    }
    dev::sync_block();
    const int picked = sh.picked;
    if (total_out) *total_out = total;
    dev::sync_block();  // running/picked are free again
    return picked;
}

}  // namespace aff::gpu
