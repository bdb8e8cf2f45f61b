// The MoE router of the CPU reference (model doc §3.9), one function for the forward
// (Model::moe in forward.cpp) and for the tests of the GPU router kernel
// (kernels/router_topk.hip: tests/gpu/router_topk_test.cpp, aff-gpucheck), so the kernel is
// held to the very numbers the forward computes: s = sqrt(softplus(logit)) in float;
// selection by top-k of s + bias (learned routing, ties to the lower expert id) or the
// token's row of tid2eid (hash routing); weights s / (Σ_selected s + 1e-20) when normalised,
// else s, times route_scale.
#pragma once

#include <cstdint>

namespace aff {

struct RouterShape {
    int experts = 0;          // E
    int top_k = 0;            // k
    float route_scale = 1.0f; // routed_scaling_factor
    bool normalise = true;    // norm_topk_prob
};

// logits [tokens][experts]. Learned routing: bias [experts] (selection only; null: none) and
// tid2eid null. Hash routing: tid2eid [vocab][top_k] and token_ids [tokens]; bias unused.
// Writes ids [tokens][top_k] (learned: best first; hash: in table order) and weights
// [tokens][top_k]. keys, when given (learned routing), receives s + bias [tokens][experts],
// the values the selection ranked.
void route(const float* logits, int tokens, const RouterShape& shape, const float* bias, const std::int32_t* tid2eid,
           const std::int32_t* token_ids, std::int32_t* ids, float* weights, float* keys = nullptr);

}  // namespace aff
