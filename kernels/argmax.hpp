// The argmax of rows of logits on the GPU: the greedy draft chains (forward_mtp.cpp's
// mtp_draft_greedy, forward_dspark.cpp's dspark_greedy) pick each guess on the device, so a
// guess's id goes straight into the next step's token buffer instead of a V-float row coming
// to the host, and GpuModel::forward_ids picks a greedy generation's tokens and checks its
// verify calls where the logits are. Host-callable declarations only; device code in
// argmax.hip. CPU twin: libaff/runtime/greedy_pick.hpp (the sampler's temperature 0, the
// drafters' plain guesses), whose rule this copies exactly, ties and NaN included.
#pragma once

#include <cstdint>

namespace aff::gpu {

// For each of `rows` rows of x (row r at x + r·stride, `cols` floats; fp32 device memory):
// out[r] = the host's pick, which starts from id 0 and moves to i only when x[i] > x[best]:
// the lowest id of the largest value; NaN never wins, but a NaN at id 0 is never left (0).
// When `copy` is set the same ids also go to copy[r] (e.g. the embedding's token buffer).
// All pointers are device memory; cols >= 1.
void argmax_rows(const float* x, int rows, int cols, long long stride, int32_t* out, void* stream,
                 int32_t* copy = nullptr);

}  // namespace aff::gpu
