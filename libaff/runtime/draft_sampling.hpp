// How a model's own drafter turns its logits into a guess (drafter.hpp's two kinds of guess):
// at temperature 0 the argmax, a plain guess; else a draw with the generation's sampling
// parameters from a sampler of the drafter's own (seeded apart from the target's), whose
// distribution the loop needs for speculative acceptance. Shared by the DSpark drafter
// (dspark_drafter.hpp); the MTP drafter has the same rule written in its own file.
#pragma once

#include "libaff/runtime/sampler.hpp"

#include <cstdint>
#include <optional>
#include <span>

namespace aff {

// The drafter's sampler for a generation: none at temperature 0.
std::optional<Sampler> draft_sampler(const SamplerParams& sampling);

// The guess from one row of logits: the argmax (ties: the lower id) without a sampler, else a
// draw whose distribution is written to q (the vocabulary's size).
std::int32_t draft_pick(std::optional<Sampler>& sampler, std::span<const float> logits, std::span<float> q);

}  // namespace aff
