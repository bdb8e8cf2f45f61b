// The greedy pick (greedy_pick.hpp).
#include "libaff/runtime/greedy_pick.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff {

std::int32_t greedy_pick(std::span<const float> logits, std::size_t candidates) {
    const std::size_t n = std::min(candidates, logits.size());
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return static_cast<std::int32_t>(best);
}

std::vector<std::int32_t> greedy_picks(std::span<const float> rows, std::size_t vocab, std::size_t candidates) {
    if (vocab == 0 || rows.size() % vocab != 0) throw_internal("greedy_picks: rows that are not whole rows of the vocabulary");
    std::vector<std::int32_t> picks(rows.size() / vocab);
    for (std::size_t r = 0; r < picks.size(); ++r) picks[r] = greedy_pick(rows.subspan(r * vocab, vocab), candidates);
    return picks;
}

}  // namespace aff
