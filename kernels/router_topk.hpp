// MoE router on the GPU (model doc §3.9), from router logits to the chosen experts and their
// mixing weights: s = sqrt(softplus(logit)); selection by top-k of s + bias (learned layers)
// or by the token's tid2eid row (hash layers); weights s / Σ_selected s, times route_scale.
// Host-callable declarations only; device code in router_topk.hip. CPU twin: the CPU forward's
// own router, libaff/model/router.hpp (aff::route).
#pragma once

#include <cstdint>

namespace aff::gpu {

struct RouterConfig {
    int experts = 256;          // E, at most 1024
    int top_k = 6;              // k, at most 16
    float route_scale = 1.5f;   // routed_scaling_factor
};

// logits [tokens][experts] (fp32). Learned layer: bias [experts] (selection only) and
// tid2eid == nullptr. Hash layer: tid2eid [vocab][top_k] (int32; ids checked when loaded)
// and token_ids [tokens]; bias is ignored. Writes ids [tokens][top_k] (learned: by falling
// s + bias, ties to the lower expert id; hash: in table order) and weights [tokens][top_k].
// All pointers are device memory.
// A second copy of ids and weights (the route ring, libaff/gpu/route_ring.hpp): when the
// pointers are set, the kernel writes the same values there too, in the same layout; one
// launch either way, so a captured graph records routing at no extra node.
struct RouterCopy {
    int32_t* ids = nullptr;
    float* weights = nullptr;
};
void router_topk(const float* logits, int tokens, const RouterConfig& c, const float* bias,
                 const int32_t* tid2eid, const int32_t* token_ids, int32_t* ids, float* weights, void* stream,
                 const RouterCopy& copy = {});

// softplus, sqrt and a k-term sum in fp32; ids must match exactly.
inline constexpr double router_topk_max_nmse = 1e-10;

}  // namespace aff::gpu
