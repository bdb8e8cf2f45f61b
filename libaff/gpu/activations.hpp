// One part of GpuModel::Impl (forward_impl.hpp): the activations of one call, carved out of
// one device buffer sized for `capacity` tokens (at least kScratchTokens; grown on demand).
// One list (layout) both sizes and places them, so the plan and the allocation cannot
// disagree. Private to the GPU forward.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/hc.hpp"

#include <cstddef>
#include <cstdint>

namespace aff::gpu::fwd {

inline constexpr int kScratchTokens = 64;
inline constexpr int kDecodeTokens = 4;  // calls of up to this many tokens give attention its split-key scratch

// What the list depends on besides the token count.
struct ActivationShape {
    const ModelConfig* config = nullptr;
    HcConfig hc;
    bool rotated_experts = false;  // some routed expert is TQ2875R: rotated copies of the inputs
    bool attention_on_gpu = false;
    int scores_stride = 1;         // indexer scores per token
    // Tiered experts: the prefill GEMMs' scratch slots for bus-read experts (kernels/
    // expert_stage.hpp), each stage_slot_bytes; 0: none, nor their table (every expert in the
    // arena). stage_slots_max 0 (staging off): the table, no slot.
    std::size_t stage_slot_bytes = 0;
    int stage_slots_max = 0;  // GpuOptions::prefill_stage_slots
};

// Scratch slots a call of `tokens` tokens gets: as many as experts could have more than one
// GEMM tile of jobs (tokens · k / 64, at least 1), up to stage_slots_max and the expert count.
// Sized by the token count so that the 64-token activations the plan counts take few.
// 0 when the shape has none.
int stage_slots(int tokens, const ActivationShape& shape);

struct Activations {
    int capacity = 0;
    Buffer scratch;
    float *x = nullptr, *u = nullptr, *a = nullptr, *f = nullptr, *post = nullptr, *comb = nullptr, *hc_scratch = nullptr;
    float *logits_router = nullptr, *route_w = nullptr, *g1 = nullptr, *g3 = nullptr, *routed = nullptr;
    float *a_rot = nullptr, *g1_rot = nullptr;  // H·a and H·g1 rows, for TQ2875R experts
    float *s1 = nullptr, *s3 = nullptr, *shared = nullptr, *y = nullptr, *logits = nullptr;
    std::int32_t *tokens_dev = nullptr, *route_ids = nullptr;
    std::int32_t* logit_ids = nullptr;  // each logits row's greedy pick (GpuModel::forward_ids)
    std::int32_t* route_ring = nullptr;  // every layer's routing of the call (route_ring.hpp)
    void* moe_groups = nullptr;  // moe_group's scratch (prefill GEMM path)
    // expert_stage's (tiered, prefill GEMM path): the per-call table [E], the slots' sources and
    // the slots (stage_slot_count of ActivationShape::stage_slot_bytes).
    const std::uint8_t** stage_table = nullptr;
    const std::uint8_t** stage_sources = nullptr;
    std::uint8_t* stage_slot_base = nullptr;
    int stage_slot_count = 0;
    // The decode prefetch's predicted routing (tiered; GpuModel::Impl::prefetch_predicted), for
    // up to kDecodeTokens tokens beside the call's own: the FFN site's collapse of the streams
    // entering the layer, its pre step's post and comb (not the call's: the attention's expand
    // still needs those), hc_site's scratch, the router logits, ids and weights, and the
    // pick's priorities [E]. They use the stage slots, which decode-sized calls leave free.
    float *pred_a = nullptr, *pred_post = nullptr, *pred_comb = nullptr, *pred_scratch = nullptr;
    float *pred_logits = nullptr, *pred_w = nullptr;
    std::int32_t *pred_ids = nullptr, *pred_counts = nullptr;
    // Attention on the GPU.
    float *cq = nullptr, *q = nullptr, *kv = nullptr, *o = nullptr, *z = nullptr, *ckv = nullptr, *cg = nullptr;
    float *ikv = nullptr, *ig = nullptr, *qi = nullptr, *wi = nullptr, *scores = nullptr;
    std::int32_t *selected = nullptr, *selected_count = nullptr, *positions = nullptr;
    float* attention_scratch = nullptr;  // the attention kernel's split-key scratch, decode (<= 4 tokens)

    // Places the activations of `tokens` tokens from base on (or only counts them when base
    // is null); returns the bytes used.
    std::size_t layout(std::uint8_t* base, int tokens, const ActivationShape& shape);
    // Makes room for `tokens` tokens; returns whether the buffer moved (what pointed into it is stale).
    bool ensure(int tokens, const ActivationShape& shape);
};

}  // namespace aff::gpu::fwd
