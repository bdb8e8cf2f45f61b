// The GPU residents of a policy ordered by the policy's score (higher: keep), so the
// victim is always the lowest: LRU, LFU, FIFO, heat and Belady differ only in the score.
// Ties go to the lower key, which keeps every replay deterministic.
#pragma once

#include "libaff/placement/tiers.hpp"

#include <cstdint>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace aff::placement {

class RankedResidents {
public:
    using Score = std::pair<double, double>;  // compared lexicographically

    void reset(std::uint32_t keys, std::span<const Tier> tiers) {
        score_.assign(keys, Score{0, 0});
        resident_.assign(keys, false);
        order_.clear();
        for (std::uint32_t k = 0; k < keys && k < tiers.size(); ++k)
            if (tiers[k] == Tier::gpu) insert(k);
    }
    bool resident(ExpertKey k) const { return resident_[k]; }
    bool empty() const { return order_.empty(); }
    const Score& score(ExpertKey k) const { return score_[k]; }
    void set_score(ExpertKey k, Score s) {
        if (resident_[k]) order_.erase({score_[k], k});
        score_[k] = s;
        if (resident_[k]) order_.insert({s, k});
    }
    ExpertKey victim() const { return order_.begin()->second; }
    void insert(ExpertKey k) {
        resident_[k] = true;
        order_.insert({score_[k], k});
    }
    void erase(ExpertKey k) {
        order_.erase({score_[k], k});
        resident_[k] = false;
    }

private:
    std::vector<Score> score_;
    std::vector<bool> resident_;
    std::set<std::pair<Score, ExpertKey>> order_;
};


}  // namespace aff::placement
