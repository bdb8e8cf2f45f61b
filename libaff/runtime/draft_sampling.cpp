// Guesses from a drafter's logits (draft_sampling.hpp).
#include "libaff/runtime/draft_sampling.hpp"

#include "libaff/runtime/greedy_pick.hpp"

#include <algorithm>
#include <vector>

namespace aff {

std::optional<Sampler> draft_sampler(const SamplerParams& sampling) {
    if (sampling.temperature <= 0.0f) return std::nullopt;
    SamplerParams own = sampling;
    own.seed ^= 0x9e3779b97f4a7c15ull;  // draws of their own, not the target's
    return Sampler(own);
}

std::int32_t draft_pick(std::optional<Sampler>& sampler, std::span<const float> logits, std::span<float> q) {
    if (!sampler) return greedy_pick(logits);
    std::vector<float> p;
    sampler->distribution(logits, p);
    std::copy(p.begin(), p.end(), q.begin());
    return sampler->sample(logits);
}

}  // namespace aff
