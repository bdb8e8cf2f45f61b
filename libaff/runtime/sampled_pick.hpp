// The picks of a sampled generation whose one filter is the temperature (generate.cpp's
// sampled-picks mode), made where the logits are: Sequence::forward_ids' host default follows
// this rule, and so does its device twin (kernels/speculative_rows.hpp), so on the GPU a
// decode step or a verify call brings back one id a row instead of a row of the vocabulary,
// and speculative acceptance runs on the device. Each row is decided by two uniform draws of
// its own, taken by the position of the token it chooses (positional_uniforms), so a row's pick
// depends neither on how tokens were split into calls nor on how many rows of an earlier call
// were thrown away:
//   - a plain row (the last row of a call, or any row without a draft distribution): a draw
//     from p = softmax(logits / T) by the second draw, the first id whose running sum of p
//     passes it;
//   - a row that verifies a guess g drawn from a draft distribution q: g when u1·q(g) < p(g)
//     (accepted with probability min(1, p/q)), else a draw by u2 from max(0, p - q)
//     normalised (never g); where p and q agree to rounding, from p less g.
// Either way the pick is distributed as p. With plain guesses (no q) every row is plain and the
// loop accepts a guess only where the row's pick is that very guess, so the tokens are those of
// a run without drafts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff {

class Drafter;  // drafter.hpp

// How Sequence::forward_ids picks when it samples (sequence.hpp; null there: greedy).
struct RowSampling {
    float temperature = 1.0f;          // > 0
    std::span<const double> uniforms;  // two for each row forward_ids returns: [accept, draw], in [0, 1)
    // The drafter whose last proposal a verify call's guesses are, when it drew them from
    // distributions (Drafter::draft_distribution): row j < rows - 1 verifies the call's token
    // j + 1 against its q row j, which a GPU backend reads on the device where the drafter left
    // it there (Drafter::draft_on_device). Null: every row plain.
    const Drafter* draft = nullptr;
};

// One row's pick among the first `candidates` ids of `logits` (all when candidates >= the
// size): verifying `guess` against `q` (the vocabulary's size) when guess >= 0, else plain.
std::int32_t sampled_pick(std::span<const float> logits, std::size_t candidates, float temperature,
                          std::int32_t guess, std::span<const float> q, double u_accept, double u_draw);

// sampled_pick of each `vocab`-float row of `rows`, the call's `tokens` giving the guesses
// (row j's is tokens[j + 1] when s.draft is set; rows.size() / vocab rows, the call's last ones).
std::vector<std::int32_t> sampled_picks(std::span<const float> rows, std::size_t vocab, std::size_t candidates,
                                        std::span<const std::int32_t> tokens, const RowSampling& s);

// forward_ids' host rule for rows of logits: sampled_picks with a sampling rule, else
// greedy_picks (greedy_pick.hpp).
std::vector<std::int32_t> row_picks(std::span<const float> rows, std::size_t vocab, std::size_t candidates,
                                    std::span<const std::int32_t> tokens, const RowSampling* sampling);

// The two draws of the row that chooses the token at each of `rows` positions from `first` on,
// for `seed`: a counter-based generator (SplitMix64 of the seed, the position and the draw),
// so the draws of a position are the same whichever call runs it.
std::vector<double> positional_uniforms(std::uint64_t seed, std::int64_t first, std::size_t rows);

}  // namespace aff
