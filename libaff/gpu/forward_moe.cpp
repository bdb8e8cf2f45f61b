// The MoE block on the GPU (model doc §3.9, Model::moe): shared expert, router, routed experts
// (codebook-stored through moe_gemv_routed or moe_gemm, each expert found through the expert
// table when they run, or dense stacks), combine. Tiered prefill: bus-read experts staged into
// HBM before the GEMMs (stage_bus_experts); tiered decode: the prefetch's table and its hits.
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/expert_stage.hpp"
#include "kernels/hadamard.hpp"
#include "kernels/moe_gemm.hpp"
#include "kernels/moe_gemv.hpp"
#include "kernels/router_topk.hpp"
#include "kernels/swiglu.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::routed_codebook(const LayerRefs& r, int n) {
    void* s = stream.handle();
    const int D = c.hidden_size, I = c.moe_intermediate_size, k = c.experts_per_token;
    const std::uint8_t* base = arena.as<std::uint8_t>();
    const std::uint16_t* cb = at<std::uint16_t>(codebook_dev);
    const int E = c.n_routed_experts, total = n * k;
    // Flags [matrix][expert], matrix as ExpertMatrix numbers it (w1, w2, w3).
    auto flags = [&](ExpertMatrix which) { return base + r.rotated_flags + std::size_t(static_cast<int>(which)) * E; };
    // The decode prefetch's per-call table where it ran (forward_prefetch.cpp), else the layer's.
    const std::uint8_t* const* table = prefetch_table ? prefetch_table : at<const std::uint8_t*>(r.expert_row);
    if (r.rotated_w13) hadamard_rotate(a, D, a_rot, D, D, n, s);
    for (int t0 = 0; t0 < n; t0 += kMoeGemvMaxBatch) {
        const std::size_t p0 = std::size_t(t0) * k;
        MoeGemvRouted up;
        up.ids = route_ids + p0;
        up.tokens = std::min(kMoeGemvMaxBatch, n - t0);
        up.top_k = k;
        up.x = a + std::size_t(t0) * D;
        up.x_token_stride = D;
        up.x_slot_stride = 0;
        up.experts = table;
        up.experts_count = E;
        if (!r.rotated_w13) {
            up.matrices = 2;
            up.offset[0] = extent.w1;
            up.offset[1] = extent.w3;
            up.y[0] = g1 + p0 * I;
            up.y[1] = g3 + p0 * I;
            moe_gemv_routed(up, I, D, cb, kMoeGemvDefault, s);
            continue;
        }
        up.x_rotated = a_rot + std::size_t(t0) * D;
        for (const ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w3}) {
            const bool w1 = which == ExpertMatrix::w1;
            up.offset[0] = w1 ? extent.w1 : extent.w3;
            up.y[0] = (w1 ? g1 : g3) + p0 * I;
            up.rotated = flags(which);
            moe_gemv_routed(up, I, D, cb, kMoeGemvDefault, s);
        }
    }
    swiglu(g1, g3, (long long)total * I, static_cast<float>(c.swiglu_limit), g1, s);
    if (r.rotated_w2) hadamard_rotate(g1, I, g1_rot, I, I, total, s);  // read by the rotated experts' w2
    for (int t0 = 0; t0 < n; t0 += kMoeGemvMaxBatch) {
        const std::size_t p0 = std::size_t(t0) * k;
        MoeGemvRouted down;
        down.ids = route_ids + p0;
        down.tokens = std::min(kMoeGemvMaxBatch, n - t0);
        down.top_k = k;
        down.experts = table;
        down.experts_count = E;
        down.offset[0] = extent.w2;
        down.y[0] = routed + p0 * D;
        down.x = g1 + p0 * I;
        down.x_token_stride = std::int64_t(k) * I;
        down.x_slot_stride = I;
        if (r.rotated_w2) {
            down.rotated = flags(ExpertMatrix::w2);
            down.x_rotated = g1_rot + p0 * I;
        }
        moe_gemv_routed(down, D, I, cb, kMoeGemvDefault, s);
    }
}

void GpuModel::Impl::routed_codebook_gemm(const LayerRefs& r, int n) {
    void* s = stream.handle();
    const int D = c.hidden_size, I = c.moe_intermediate_size, k = c.experts_per_token, E = c.n_routed_experts;
    const int total = n * k;
    const std::uint8_t* const* table = at<const std::uint8_t*>(r.expert_row);
    const std::uint16_t* cb = at<std::uint16_t>(codebook_dev);
    moe_group(route_ids, total, E, moe_groups, s);
    table = stage_bus_experts(table, n);
    moe_gemm(table, extent.w1, I, D, moe_groups, total, E, a, k, g1, cb, s);
    moe_gemm(table, extent.w3, I, D, moe_groups, total, E, a, k, g3, cb, s);
    swiglu(g1, g3, (long long)total * I, static_cast<float>(c.swiglu_limit), g1, s);
    moe_gemm(table, extent.w2, D, I, moe_groups, total, E, g1, 1, routed, cb, s);
}

// Tiered: the experts this call reads over the bus, copied once into the activations' slots
// (kernels/expert_stage.hpp) after moe_group counted their jobs, and the per-call table that
// points at them; the bus ranges are the host pool's and the SSD staging slots' device views.
// Off, the pick still runs with no slot (the counters: what staging would have saved) and the
// GEMMs read the layer's own table.
ExpertStageArgs GpuModel::Impl::stage_args(const std::uint8_t* const* table) const {
    ExpertStageArgs a;
    a.table = table;
    a.experts = c.n_routed_experts;
    a.tile_jobs = kMoeGemmTileM;
    auto range = [&](int i, const void* base, std::size_t bytes) {
        a.far_lo[i] = static_cast<const std::uint8_t*>(base);
        a.far_hi[i] = a.far_lo[i] + (base ? bytes : 0);
    };
    range(0, tiers->pool.device_data(), tiers->pool.size());
    if (tiers->ssd) range(1, tiers->ssd->staging.device_data(), tiers->ssd->staging.size());
    a.slots = stage_slot_base;
    a.slot_stride = extent_stride;
    a.bytes = (extent.bytes + 15) / 16 * 16;
    a.stage_table = stage_table;
    a.slot_source = stage_sources;
    return a;
}

RouterConfig GpuModel::Impl::router_config() const {
    RouterConfig rc;
    rc.experts = c.n_routed_experts;
    rc.top_k = c.experts_per_token;
    rc.route_scale = static_cast<float>(c.routed_scaling_factor);
    return rc;
}

const std::uint8_t* const* GpuModel::Impl::stage_bus_experts(const std::uint8_t* const* table, int n) {
    if (!tiers || !stage_table) return table;
    ExpertStageArgs a = stage_args(table);
    a.counts = moe_group_counts(moe_groups);
    // automatic (RESULTS.md, session 10 round B): from kStageEveryFrom tokens every bus-read
    // expert (at 512 tokens that was 7-12 % faster than staging only the multi-tile ones);
    // below, only the experts the GEMM would read twice or more (a one-tile expert's copy reads
    // the same bytes and only serialises them: within ±10 % at 64 tokens). Off keeps
    // the rule it had (min 1: its counters with no slot say what on would stage).
    const bool every = options.prefill_staging != PrefillStaging::automatic || n >= kStageEveryFrom;
    a.min_jobs = every ? 1 : kMoeGemmTileM + 1;
    const bool copy = options.prefill_staging != PrefillStaging::off;
    a.slot_count = copy ? std::min(stage_slot_count, fwd::stage_slots(n, activation_shape())) : 0;
    a.counters = static_cast<std::uint32_t*>(tiers->stage_counters.data());
    expert_stage(a, stream.handle());
    tiers->stage_dirty = true;
    return copy ? stage_table : table;
}

void GpuModel::Impl::moe(const LayerRefs& r, int n) {
    void* s = stream.handle();
    const int D = c.hidden_size, I = c.moe_intermediate_size, k = c.experts_per_token;
    const float limit = static_cast<float>(c.swiglu_limit);
    float* shared_out = nullptr;
    mark("shared expert");
    if (r.has_shared) {
        apply_pair(r.shared_w1, s1, I, r.shared_w3, s3, I, a, D, n);  // one launch for both
        swiglu(s1, s3, (long long)n * I, limit, s1, s);
        apply(r.shared_w2, s1, I, n, shared, D);
        shared_out = shared;
    }
    if (options.forward.no_routed_experts) {
        if (shared_out) stream.copy(f, shared_out, std::size_t(n) * D * 4);
        else stream.fill(f, 0, std::size_t(n) * D * 4);
        return;
    }
    mark("router");
    apply(r.gate, a, D, n, logits_router, c.n_routed_experts);
    router_topk(logits_router, n, router_config(), r.hash ? nullptr : at<float>(r.bias),
                r.hash ? at<std::int32_t>(r.tid2eid) : nullptr, tokens_dev, route_ids, route_w, s, ring_slot(r, n));
    if (tiers && tiers->ssd) stage_ssd(int(&r - layers.data()), n);  // its SSD experts into staging slots
    if (prefetch_table) {  // the prefetch's copies and table are done; count its experts the router chose
        stream.wait(tiers->prefetch_join);
        expert_stage_hits(route_ids, n * k, at<const std::uint8_t*>(r.expert_row), prefetch_table,
                          static_cast<std::uint32_t*>(tiers->prefetch_counters.data()) + ExpertTiers::kPrefetchHits, s);
    }
    const int jobs = n * k;
    const std::uint8_t* base = arena.as<std::uint8_t>();
    mark("routed experts");
    // moe_gemm reads no rotated input yet: layers with TQ2875R experts stay on moe_gemv.
    if (experts_codebook && use_gemm(n) && !r.rotated_w13 && !r.rotated_w2 &&
        moe_gemm_takes(I, D, c.n_routed_experts) && moe_gemm_takes(D, I, c.n_routed_experts)) {
        routed_codebook_gemm(r, n);
        moe_combine(routed, route_w, n, k, D, shared_out, f, s);
        return;
    }
    if (experts_codebook) {
        routed_codebook(r, n);
        moe_combine(routed, route_w, n, k, D, shared_out, f, s);
        return;
    }
    dense_gemv_indexed(base + r.experts_w1.offset, r.experts_w1.type, I, D, route_ids, jobs, a, k, g1, s);
    dense_gemv_indexed(base + r.experts_w3.offset, r.experts_w3.type, I, D, route_ids, jobs, a, k, g3, s);
    swiglu(g1, g3, (long long)jobs * I, limit, g1, s);
    dense_gemv_indexed(base + r.experts_w2.offset, r.experts_w2.type, D, I, route_ids, jobs, g1, 1, routed, s);
    moe_combine(routed, route_w, n, k, D, shared_out, f, s);
}

}  // namespace aff::gpu
