// The layer loop of the GPU forward (Model::layer_forward): embedding, mHC around attention
// and MoE with their norms, then the hyper head, the final norm and the head.
#include "aff/gpu/forward_impl.hpp"
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
// Nothing here waits for the host while attention runs on the GPU: decode captures it.
void GpuModel::Impl::run(std::span<const Seq> seqs, int n, int first, GpuDecodeState* cpu_state) {
    void* s = stream.handle();
    const int hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const HcConfig hcc = hc_config();
    prefill_call = seqs.size() == 1;
    mark_layer = -1;
    mark("embedding");
    gpu::embed(at<void>(embed.offset), embed.type, D, tokens_dev, n, hc, x, s);  // §3.0

    std::vector<float> a_host, f_host;
    const int count = options.forward.max_layers < 0 ? c.num_layers : std::min(options.forward.max_layers, c.num_layers);
    for (int l = 0; l < count; ++l) {
        const LayerRefs& r = layers[l];
        mark_layer = l;
        // mHC around attention (Model::layer_forward): collapse, attn_norm.
        mark("mHC and norms");
        hc_pre(x, n, {at<float>(r.hc_attn_fn), at<float>(r.hc_attn_base), at<float>(r.hc_attn_scale)}, hcc,
               hc_scratch, post, comb, u, s);
        rms_norm(u, at<float>(r.attn_norm), a, n, D, eps, s);
        if (attention_on_gpu) {
            attention_gpu(l, seqs, n);
        } else {  // attention on the CPU (see forward.hpp): one sequence, its start on the host
            a_host.resize(std::size_t(n) * D);
            f_host.resize(std::size_t(n) * D);
            stream.copy(a_host.data(), a, a_host.size() * 4);
            stream.synchronize();
            cpu.attention_block(l, cpu_state->attention.layers[l], seqs[0].start, n, a_host.data(), f_host.data());
            stream.copy(f, f_host.data(), f_host.size() * 4);
        }
        mark("mHC and norms");
        hc_post(x, f, post, comb, n, D, s, hc);
        // mHC around the MoE.
        hc_pre(x, n, {at<float>(r.hc_ffn_fn), at<float>(r.hc_ffn_base), at<float>(r.hc_ffn_scale)}, hcc, hc_scratch,
               post, comb, u, s);
        rms_norm(u, at<float>(r.ffn_norm), a, n, D, eps, s);
        moe(r, n);
        mark("mHC and norms");
        hc_post(x, f, post, comb, n, D, s, hc);
    }
    mark_layer = -1;
    mark("hyper head, final norm, head");

    // §3.2 hyper head, §3.10 final norm and head (Model::hyper_head_logits).
    const int rows = n - first;
    hc_head(x + std::size_t(first) * hc * D, rows, {at<float>(hc_head_fn), at<float>(hc_head_base),
                                                    at<float>(hc_head_scale)},
            hcc, hc_scratch, y, s);
    rms_norm(y, at<float>(norm), y, rows, D, eps, s);
    dense_gemv(at<void>(head.offset), head.type, V, D, y, D, rows, logits, V, s);
    mark("end");
}

}  // namespace aff::gpu
