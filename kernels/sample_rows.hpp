// Drawing a token from rows of logits on the GPU: the sampled draft chains (forward_mtp.cpp's
// mtp_draft_sampled) draw each guess on the device, so a guess goes straight into the next
// step's token buffer instead of a row of the vocabulary coming to the host to be sampled.
// Speculative sampling keeps the trunk's output distribution for any draft distribution q as
// long as the guess is drawn from q and the acceptance uses that same q; so the device draws
// from the plain tempered softmax (no top-k, top-p or min-p: those need a sort) and hands back
// q itself, row for row, for the host's acceptance. Host-callable declarations only; device
// code in sample_rows.hip.
#pragma once

#include <cstdint>

namespace aff::gpu {

// For each of `rows` rows of x (row r at x + r·stride, `cols` floats; fp32 device memory):
// q = softmax(x / temperature) (NaN counts as -inf), and out[r] = the first id, in id order,
// whose running sum of q exceeds u[r]·Σq (u[r] in [0, 1); a draw from q when u is uniform),
// never an id of q 0; q's row into q_out + r·cols when q_out is set; the id also into copy[r]
// when set. The running sums go in fixed chunks in a fixed order, so the same row and u give
// the same id. temperature > 0, cols >= 1. All pointers device memory.
void sample_rows(const float* x, int rows, int cols, long long stride, float temperature, const float* u,
                 int32_t* out, float* q_out, void* stream, int32_t* copy = nullptr);

}  // namespace aff::gpu
