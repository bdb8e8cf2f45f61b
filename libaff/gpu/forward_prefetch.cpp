// The decode prefetch of a tiered model (GpuTierOptions::prefetch_experts; issue 17). At batch
// 1 a layer's MoE reads its pooled experts over the bus while the bus idles through the rest of
// the layer: its mHC sites, norms and attention (about as long as one V4 expert takes to cross
// PCIe). So right after the attention site, on a stream of its own, the layer's routing is
// predicted from what the layer has in hand then, the streams entering it: the FFN site's pre
// step and norm on them and the layer's router, as if attention added nothing (the CPU
// reference's DecodeState::predicted_routes; on tiny-trained it names ~80 % of the experts the
// router then picks, tests/bench/RESULTS.md), the hash layers' ids exact from the token. The
// best predicted pooled experts are copied into the stage slots (kernels/expert_stage.hpp, the
// prefill staging's pick and copy, here on GpuTierOptions::prefetch_copy_blocks blocks: a full
// grid's mapped reads in flight slowed the attention kernels beside it by as much as the copy
// saved) while attention runs on the model's stream, and the MoE
// waits for the copy and reads the per-call table that points at them. A wrong guess costs
// bus time only; the MoE reads the same bytes with the same kernel either way, so the logits
// are those of the resident model bit for bit (tests/gpu/tiers_test.cpp).
//
// Why this is safe to run beside attention: until the FFN site the model's stream does not
// write x (attention reads `a` and writes f; the expand waits as pending), and the prediction
// writes only its own buffers (Activations::pred_*) and the stage slots and table, which
// decode-sized calls do not otherwise use. Why a slot is not overwritten while read: the next
// layer's fork is recorded after this layer's MoE on the model's stream, so its copy starts
// after the kernels that read the slots finished. Inside a captured decode graph the fork and
// join are the graph's edges (events recorded and waited on during capture).
//
// The copy itself: in a captured decode step on NVIDIA, by the copy engine (kernels/
// copy_switch.hpp: a switch node a slot, its body e a DMA copy of expert e from where the pool
// held it at capture; the kernel's SM loads had slowed attention beside them); the kernel copy
// for the rest (HIP, calls not captured, experts moved since the capture).
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/copy_switch.hpp"
#include "kernels/expert_stage.hpp"
#include "kernels/router_topk.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::prefetch_predicted(int l, int n) {
    prefetch_table = nullptr;
    if (!tiers || options.tiers.prefetch_experts <= 0 || tiers->ssd || tiers->pool.size() == 0) return;
    if (l >= c.num_layers || n > kDecodeTokens || !attention_on_gpu || !experts_codebook || use_gemm(n) ||
        options.forward.no_routed_experts || stage_slot_count < 1 || !pred_a)
        return;
    const HcConfig hcc = hc_config();
    if (!hc_site_takes(n, hcc)) return;
    ExpertTiers& t = *tiers;
    const LayerRefs& r = layers[l];
    const int D = c.hidden_size, E = c.n_routed_experts, k = c.experts_per_token;
    t.prefetch_fork.record(stream);
    t.prefetch_stream.wait(t.prefetch_fork);
    void* s = t.prefetch_stream.handle();
    if (!r.hash) {  // a hash layer's ids come from the token alone: no collapse, no gate
        const HcWeights w{at<float>(r.hc_ffn_fn), at<float>(r.hc_ffn_base), at<float>(r.hc_ffn_scale)};
        hc_site(x, nullptr, pred_post, pred_comb, n, w, hcc, at<float>(r.ffn_norm), pred_scratch, pred_a, s);
        apply(r.gate, pred_a, D, n, pred_logits, E, 0, -1, s);
    }
    // On a hash layer router_topk computes the weights (pred_w, which nothing reads) from
    // whatever pred_logits holds, unwritten on a model whose layers so far were all hashed:
    // only the ids feed the priorities.
    router_topk(pred_logits, n, router_config(), r.hash ? nullptr : at<float>(r.bias),
                r.hash ? at<std::int32_t>(r.tid2eid) : nullptr, tokens_dev, pred_ids, pred_w, s);
    expert_stage_priorities(pred_ids, n * k, k, E, pred_counts, s);
    ExpertStageArgs a = stage_args(at<const std::uint8_t*>(r.expert_row));
    a.counts = pred_counts;
    a.min_jobs = 1;
    a.slot_count = std::min(options.tiers.prefetch_experts, stage_slot_count);
    a.copy_blocks = options.tiers.prefetch_copy_blocks;
    a.counters = static_cast<std::uint32_t*>(t.prefetch_counters.data());
    if (engine_copies(a.slot_count)) {
        a.slot_expert = pred_slot_expert;
        expert_stage_pick(a, s);
        CopySwitchSelect sel;
        sel.slot_expert = pred_slot_expert;
        sel.slot_source = a.slot_source;
        sel.snapshot = t.engine_snapshot.as<const std::uint8_t*>() + std::size_t(l) * E;
        sel.slots = a.slot_count;
        sel.none = static_cast<unsigned>(E);
        sel.counter = a.counters + ExpertTiers::kPrefetchByEngine;
        for (int i = 0; i < a.slot_count; ++i) sel.handles[i] = t.prefetch_stream.capture_switch(sel.none);
        copy_switch_select(sel, s);
        const auto from = t.engine_sources.begin() + std::ptrdiff_t(l) * E;
        const std::vector<const void*> sources(from, from + E);
        for (int i = 0; i < a.slot_count; ++i)
            t.prefetch_stream.capture_switch_copies(sel.handles[i], a.slots + std::size_t(i) * a.slot_stride, sources, a.bytes);
        expert_stage_copy(a, s);  // the slots the engine did not take (their sources left set)
    } else {
        expert_stage(a, s);
    }
    t.prefetch_join.record(t.prefetch_stream);
    t.prefetch_armed = true;
    prefetch_table = stage_table;
}

bool GpuModel::Impl::engine_copies(int slots) const {
    return tiers && options.tiers.prefetch_copy_engine && tiers->engine_snapshot_taken && copy_switch_available() &&
           slots >= 1 && slots <= kCopySwitchMaxSlots && tiers->prefetch_stream.capturing();
}

void GpuModel::Impl::refresh_engine_snapshot() {
    if (!tiers || options.tiers.prefetch_experts <= 0 || !options.tiers.prefetch_copy_engine || !copy_switch_available() ||
        tiers->ssd || tiers->pool.size() == 0)
        return;
    ExpertTiers& t = *tiers;
    // Each move leaves at most two experts where the snapshot does not have them (the promoted
    // one and its victim); those the kernel copies until the next snapshot, which costs the
    // recapture of every decode graph: taken again once a 32nd of the pool (at least 64 moves)
    // could be stale.
    const std::uint64_t stale_moves = std::max<std::uint64_t>(64, std::uint64_t(t.plan.host_slots) / 32);
    if (t.engine_snapshot_taken && t.moves - t.engine_snapshot_moves < stale_moves) return;
    const std::size_t n = std::size_t(c.num_layers) * c.n_routed_experts;
    const auto* pool_device = static_cast<const std::uint8_t*>(t.pool.device_data());
    const auto* pool_host = static_cast<const std::uint8_t*>(t.pool.data());
    std::vector<const std::uint8_t*> device(n, nullptr);
    t.engine_sources.assign(n, nullptr);
    for (int l = 0; l < c.num_layers; ++l)
        for (int e = 0; e < c.n_routed_experts; ++e) {
            const std::uint8_t* a = t.address(l, e);
            if (!a || a < pool_device || a >= pool_device + t.pool.size()) continue;  // the slab's: never prefetched
            const std::size_t k = std::size_t(l) * c.n_routed_experts + e;
            device[k] = a;
            t.engine_sources[k] = pool_host + (a - pool_device);
        }
    if (t.engine_snapshot.size() < n * sizeof(void*)) t.engine_snapshot = Buffer(n * sizeof(void*));
    // On the model's stream: after the replays queued so far (which read the old snapshot),
    // before the next; a pageable copy, so `device` may go once it returns.
    stream.copy(t.engine_snapshot.data(), device.data(), n * sizeof(void*));
    graphs.clear();  // captured against the old snapshot
    t.engine_snapshot_taken = true;
    t.engine_snapshot_moves = t.moves;
    ++t.engine_snapshots;
}

}  // namespace aff::gpu
