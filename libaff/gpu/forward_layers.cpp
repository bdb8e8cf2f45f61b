// The layer loop of the GPU forward (Model::layer_forward): embedding, mHC around attention
// and MoE with their norms, then the hyper head, the final norm and the head.
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/embed.hpp"
#include "kernels/rms_norm.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

HcConfig GpuModel::Impl::hc_config() const {
    HcConfig h;
    h.dim = c.hidden_size;
    h.sinkhorn_iters = c.hc_sinkhorn_iters;
    h.hc_eps = static_cast<float>(c.hc_eps);
    h.norm_eps = static_cast<float>(c.rms_norm_eps);
    h.streams = c.hc_mult;
    return h;
}

// The layers and the head for the n rows of `seqs` (tokens_dev and, with attention on the
// GPU, positions already hold them on the device); logits of rows first .. n-1 end in logits.
// Nothing here waits for the host while attention runs on the GPU: decode captures it. A part
// of a split model runs the embedding only if it is the first, its own layers, and the head
// only if it is the last; otherwise it returns with the residual stream in x (and an expand
// pending in f, post, comb when it returns true) for hand_over.
bool GpuModel::Impl::run(std::span<const Seq> seqs, int n, int first, GpuDecodeState* cpu_state, bool pending) {
    const int hc = c.hc_mult, D = c.hidden_size;
    prefill_call = seqs.size() == 1;
    steps.layer = -1;
    if (first_layer == 0) {
        mark("embedding");
        gpu::embed(at<void>(embed.offset), embed.type, D, tokens_dev, n, hc, x, stream.handle());  // §3.0
    }
    for (int l = first_layer; l < run_end(); ++l) {
        pending = run_layer(l, seqs, n, pending, cpu_state);
        if (taps_on) tap_after(l, n, pending);  // reads x (and the pending expand), writes only its copy
    }
    steps.layer = -1;
    if (end_layer < c.num_layers) {  // the next part continues from here
        mark("end");
        return pending;
    }
    // §3.2 hyper head, §3.10 final norm and head (Model::hyper_head_logits).
    run_head(n, first, pending, hc_head_fn, hc_head_base, hc_head_scale, norm);
    return false;
}

bool GpuModel::Impl::run_layer(int l, std::span<const Seq> seqs, int n, bool pending, GpuDecodeState* cpu_state) {
    void* s = stream.handle();
    const int hc = c.hc_mult, D = c.hidden_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const HcConfig hcc = hc_config();
    // Decode-sized calls (1..4 tokens, up to 4 streams) run each mHC site as two launches
    // (hc_site: the expand of the previous sub-block, the pre step with Sinkhorn and the norm
    // of the next); the expand then waits in f (pending) until the next site. Other calls
    // launch hc_post, hc_pre and rms_norm one by one.
    const bool fused = hc_site_takes(n, hcc);
    auto site = [&](std::size_t fn, std::size_t base, std::size_t scale, std::size_t norm_w) {
        const HcWeights w{at<float>(fn), at<float>(base), at<float>(scale)};
        if (fused) {
            hc_site(x, pending ? f : nullptr, post, comb, n, w, hcc, at<float>(norm_w), hc_scratch, a, s);
        } else {
            hc_pre(x, n, w, hcc, hc_scratch, post, comb, u, s);
            rms_norm(u, at<float>(norm_w), a, n, D, eps, s);
        }
        pending = false;
    };
    auto expand = [&] {
        if (fused) pending = true;
        else hc_post(x, f, post, comb, n, D, s, hc);
    };
    const LayerRefs& r = layers[l];
    steps.layer = l;
    // mHC around attention (Model::layer_forward): collapse, attn_norm.
    mark("mHC and norms");
    site(r.hc_attn_fn, r.hc_attn_base, r.hc_attn_scale, r.attn_norm);
    // Tiered decode: the layer's predicted pooled experts cross the bus while attention runs
    // (forward_prefetch.cpp); the MoE below waits for them.
    prefetch_predicted(l, n);
    if (attention_on_gpu) {
        attention_gpu(l, seqs, n);
    } else {  // attention on the CPU (see forward.hpp): one sequence, its start on the host
        std::vector<float> a_host(std::size_t(n) * D), f_host(std::size_t(n) * D);
        stream.copy(a_host.data(), a, a_host.size() * 4);
        stream.synchronize();
        cpu.attention_block(l, cpu_state->attention.layers[l], seqs[0].start, n, a_host.data(), f_host.data());
        stream.copy(f, f_host.data(), f_host.size() * 4);
        stream.synchronize();  // f_host is freed on return
    }
    mark("mHC and norms");
    expand();
    // mHC around the MoE.
    site(r.hc_ffn_fn, r.hc_ffn_base, r.hc_ffn_scale, r.ffn_norm);
    moe(r, n);
    prefetch_table = nullptr;  // joined in moe()
    if (!fused) mark("mHC and norms");
    expand();
    return pending;
}

void GpuModel::Impl::run_head(int n, int first, bool pending, std::size_t fn, std::size_t base, std::size_t scale,
                              std::size_t norm_w) {
    void* s = stream.handle();
    const int hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const HcConfig hcc = hc_config();
    mark("hyper head, final norm, head");
    const int rows = n - first;
    const HcWeights head_w{at<float>(fn), at<float>(base), at<float>(scale)};
    if (pending && first == 0) {  // fused: the last expand, the hyper head and the final norm
        hc_head_site(x, f, post, comb, n, head_w, hcc, at<float>(norm_w), hc_scratch, y, s);
    } else {
        if (pending) hc_post(x, f, post, comb, n, D, s, hc);
        hc_head(x + std::size_t(first) * hc * D, rows, head_w, hcc, hc_scratch, y, s);
        rms_norm(y, at<float>(norm_w), y, rows, D, eps, s);
    }
    dense_rows(at<void>(head.offset), head.type, V, D, y, D, rows, logits, V);
    mark("end");
}

void GpuModel::Impl::hand_over(Impl& next, int n, bool pending) {
    done.record(stream);
    next.stream.wait(done);
    next.steps.layer = -1;
    next.mark("hand-over between GPUs");
    const std::size_t rows = n, hc = c.hc_mult, D = c.hidden_size;
    copy_peer(next.x, next.device, x, device, rows * hc * D * 4, next.stream);
    if (!pending) return;
    copy_peer(next.f, next.device, f, device, rows * D * 4, next.stream);
    copy_peer(next.post, next.device, post, device, rows * hc * 4, next.stream);
    copy_peer(next.comb, next.device, comb, device, rows * hc * hc * 4, next.stream);
}

}  // namespace aff::gpu
