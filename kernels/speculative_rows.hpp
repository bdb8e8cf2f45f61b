// The trunk's picks of a sampled generation made on the GPU (libaff/runtime/sampled_pick.hpp
// states the rule; this is its device twin): a decode step or a verify call of k + 1 tokens
// brings back one id a row instead of a row of the vocabulary, and a verify call's speculative
// acceptance runs where its logits and the draft's q rows already are. No top-k, top-p or
// min-p (those need a sort): the generation loop uses this only where the temperature is the
// one filter. Host-callable declarations only; device code in speculative_rows.hip.
#pragma once

#include <cstdint>

namespace aff::gpu {

// For each of `rows` rows r of x (row r at x + r·stride; the first `cols` ids are candidates),
// p = softmax(x_r / temperature) over the candidates (NaN counts as -inf), uniforms u[2r]
// (accept) and u[2r + 1] (draw), each in [0, 1):
//   - r < guesses (row r verifies g = guess[r], drawn from q's row r at q + r·q_stride, which
//     covers g): out[r] = g when u[2r]·q(g) < p(g), else a draw by u[2r + 1] from max(0, p - q)
//     normalised (from p less g where that is all zero; g where p less g is too);
//   - other rows: a draw from p by u[2r + 1].
// A draw is the first id, in id order, whose running sum passes u·Σ (kernels/block_draw.hpp).
// Every value NaN or -inf: id 0. temperature > 0, 1 <= cols <= stride, 0 <= guesses <= rows,
// q set when guesses > 0; all pointers device memory.
void speculative_rows(const float* x, int rows, int cols, long long stride, float temperature, const float* u,
                      const int32_t* guess, int guesses, const float* q, long long q_stride, int32_t* out,
                      void* stream);

}  // namespace aff::gpu
