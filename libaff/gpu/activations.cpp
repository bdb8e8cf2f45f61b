// The activations of one call (activations.hpp).
#include "libaff/gpu/activations.hpp"

#include "libaff/gpu/route_ring.hpp"
#include "libaff/gpu/weight_arena.hpp"
#include "kernels/attention.hpp"
#include "kernels/moe_gemm.hpp"

#include <algorithm>
#include <type_traits>

namespace aff::gpu::fwd {

int stage_slots(int tokens, const ActivationShape& shape) {
    if (shape.stage_slot_bytes == 0 || shape.stage_slots_max <= 0) return 0;
    const ModelConfig& c = *shape.config;
    const long long jobs = (long long)tokens * c.experts_per_token;
    const long long busy = std::max<long long>(1, jobs / kMoeGemmTileM);
    return int(std::min<long long>({busy, shape.stage_slots_max, c.n_routed_experts}));
}

std::size_t Activations::layout(std::uint8_t* base, int tokens, const ActivationShape& shape) {
    const ModelConfig& c = *shape.config;
    std::size_t used = 0;
    auto take = [&](auto*& ptr, std::size_t count) {
        using T = std::remove_reference_t<decltype(*ptr)>;
        if (base) ptr = reinterpret_cast<T*>(base + used);
        used += align_up(count * sizeof(T));
    };
    const std::size_t n = tokens, D = c.hidden_size, hc = c.hc_mult, k = c.experts_per_token,
                      I = c.moe_intermediate_size, E = c.n_routed_experts, V = c.vocab_size;
    take(x, n * hc * D);
    take(u, n * D);
    take(a, n * D);
    take(f, n * D);
    take(post, n * hc);
    take(comb, n * hc * hc);
    // hc_pre's rows, or hc_site's per-block partial sums (decode-sized calls).
    const int site_rows = int(std::min<std::size_t>(n, kHcSiteMaxTokens));
    take(hc_scratch, std::max(n * (hc_mix_rows(int(hc)) + 1),
                              hc_site_takes(site_rows, shape.hc) ? hc_site_scratch_floats(site_rows, shape.hc)
                                                                 : std::size_t(0)));
    take(logits_router, n * E);
    take(route_w, n * k);
    take(g1, n * k * I);
    take(g3, n * k * I);
    take(routed, n * k * D);
    if (shape.rotated_experts) {
        take(a_rot, n * D);
        take(g1_rot, n * k * I);
    }
    take(s1, n * I);
    take(s3, n * I);
    take(shared, n * D);
    take(y, n * D);
    take(logits, n * V);
    take(tokens_dev, n);
    take(logit_ids, n);
    take(route_ids, n * k);
    take(route_ring, route_ring_words(c, n));
    {
        std::uint8_t* groups = nullptr;
        take(groups, moe_group_bytes(int(n * k), int(E)));
        moe_groups = groups;
    }
    const int slots = stage_slots(tokens, shape);
    if (shape.stage_slot_bytes > 0) {  // the table and sources even with no slot: the pick's counters
        take(stage_table, E);
        take(stage_sources, std::size_t(std::max(1, slots)));
        take(stage_slot_base, std::size_t(slots) * shape.stage_slot_bytes);
    }
    if (base) stage_slot_count = slots;
    if (shape.stage_slot_bytes > 0 && hc_site_takes(kDecodeTokens, shape.hc)) {
        const std::size_t d = kDecodeTokens;
        take(pred_a, d * D);
        take(pred_post, d * hc);
        take(pred_comb, d * hc * hc);
        take(pred_scratch, hc_site_scratch_floats(kDecodeTokens, shape.hc));
        take(pred_logits, d * E);
        take(pred_w, d * k);
        take(pred_ids, d * k);
        take(pred_counts, E);
    }
    if (shape.attention_on_gpu) {
        const std::size_t H = c.num_heads, Dh = c.head_dim, Hi = c.index_heads, Di = c.index_head_dim;
        take(cq, n * c.q_lora_rank);
        take(q, n * H * Dh);
        take(kv, n * Dh);
        take(o, n * H * Dh);
        take(z, n * c.o_groups * c.o_lora_rank);
        take(ckv, n * 2 * Dh);
        take(cg, n * 2 * Dh);
        take(ikv, n * 2 * Di);
        take(ig, n * 2 * Di);
        take(qi, n * Hi * Di);
        take(wi, n * Hi);
        take(scores, n * shape.scores_stride);
        take(selected, n * std::max(1, c.index_topk));
        take(selected_count, n);
        take(positions, n);
        take(attention_scratch, (attention_scratch_bytes(kDecodeTokens, c.num_heads, c.head_dim) + 3) / 4);
    }
    return used;
}

bool Activations::ensure(int tokens, const ActivationShape& shape) {
    if (tokens <= capacity) return false;
    const int cap = std::max(tokens, kScratchTokens);
    scratch = Buffer(layout(nullptr, cap, shape));
    layout(scratch.as<std::uint8_t>(), cap, shape);
    capacity = cap;
    return true;
}

}  // namespace aff::gpu::fwd
