// The one greedy pick (temperature 0) every path shares: the sampler's argmax, the drafters'
// plain guesses, Sequence::forward_ids' host default, and its device twin argmax_rows
// (kernels/argmax.hpp), which copies this rule exactly. Starting from id 0, move to i only
// when logits[i] > logits[best]: the lowest id of the largest value; NaN never wins, and a
// NaN at id 0 is never left. Greedy output must not depend on where the pick runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff {

// The pick among the first `candidates` ids of `logits` (all when candidates >= the size);
// 0 for an empty range.
std::int32_t greedy_pick(std::span<const float> logits, std::size_t candidates = SIZE_MAX);

// greedy_pick of each `vocab`-float row of `rows` (rows.size() a multiple of vocab).
std::vector<std::int32_t> greedy_picks(std::span<const float> rows, std::size_t vocab, std::size_t candidates);

}  // namespace aff
