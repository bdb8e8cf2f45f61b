// The tokens the sampler's filters keep (top-k, then min-p, then top-p, over the tempered
// softmax) and their weights, for Sampler (sampler.hpp), found without sorting the whole
// vocabulary: the sampler's order is larger logit first, then lower id, and a full sort of
// 129 280 ids cost 13 ms a token, longer than a decode step. With top-k the k largest are
// partially sorted (cheap for small k); without it the tokens go into bins of 1/32 nat below
// the largest logit, which keep the sampler's order between bins, and only the one bin a cut
// or a draw falls in is sorted. The weights are exp((logit - max) / temperature); the kept set
// and the draw are the full sort's (mass sums go in another order: the same up to rounding).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace aff {

struct SamplerParams;  // sampler.hpp

// The sampler's order of ids: larger logit first, then lower id, NaN as -infinity (a strict
// weak order, which a sort needs; NaN never before a number). KeptSet's cuts and draws and the
// top logprobs go by it.
bool sampler_before(std::span<const float> logits, std::int32_t a, std::int32_t b);

class KeptSet {
public:
    // The set for `logits` under `params` (temperature > 0). A row with no finite value keeps
    // id 0 alone (the sorted order's first).
    void build(std::span<const float> logits, const SamplerParams& params);
    // The kept weights' sum.
    double total() const { return total_; }
    // The kept token at which the running sum of weights, in the sampler's order, first
    // exceeds `target` (0 <= target < total()); the last kept token where rounding runs past.
    std::int32_t at(double target);
    // out[id] = weight / total() for the kept ids, 0 elsewhere (the vocabulary's size).
    void fill(std::vector<float>& out) const;

private:
    // The kept ids of bin b in the sampler's order.
    const std::vector<std::int32_t>& sorted_bin(int b);

    std::span<const float> logits_;
    bool binned_ = false;
    std::vector<float> weight_;         // without top-k: per id; 0: not kept
    std::vector<std::int32_t> list_;    // with top-k: the kept ids in order
    std::vector<float> list_weight_;    // and their weights
    std::vector<std::uint16_t> bin_;    // without: each kept id's bin (kOut: not kept)
    std::vector<double> mass_;          // without: each bin's kept weight
    std::vector<std::int32_t> scratch_;
    std::vector<float> keys_;           // with top-k: the logits, NaN as -infinity
    double total_ = 0;
};

}  // namespace aff
