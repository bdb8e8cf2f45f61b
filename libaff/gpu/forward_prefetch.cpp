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
#include "libaff/gpu/forward_impl.hpp"
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
    a.copy_depth = options.tiers.prefetch_copy_depth;
    a.copy_bulk = options.tiers.prefetch_copy_bulk;
    a.copy_chunk_kib = options.tiers.prefetch_copy_chunk_kib;
    a.counters = static_cast<std::uint32_t*>(t.prefetch_counters.data());
    expert_stage(a, s);
    t.prefetch_join.record(t.prefetch_stream);
    t.prefetch_armed = true;
    prefetch_table = stage_table;
}

}  // namespace aff::gpu
