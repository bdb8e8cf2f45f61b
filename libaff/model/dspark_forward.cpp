// The DSpark drafter's forward on the CPU reference (model doc §5.2; forward.hpp says what each
// entry point does): the stages' context rings built from the trunk's tap features, and one
// draft block through the stages, the last stage's hyper head and the shared head. The layers
// are the trunk's own code (Model::layer_forward, with the block attention of attend_block);
// only the ring fill and the heads peculiar to DSpark are written here.
#include "libaff/core/error.hpp"
#include "libaff/model/attention_ops.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/model/gemm.hpp"
#include "libaff/model/ops.hpp"

#include <cstring>

namespace aff {

DsparkState Model::new_dspark_state(std::int64_t position) const {
    DsparkState st;
    for (const LayerWeights& w : weights_.dspark.stages) st.stages.push_back(layer_state(w));
    st.first = st.position = position;
    return st;
}

void Model::dspark_extend(DsparkState& st, std::span<const float> taps) const {
    const ModelConfig& c = config_;
    const DsparkWeights& w = weights_.dspark;
    if (w.stages.empty()) throw_unsupported("the model has no DSpark stages");
    const int D = c.hidden_size, Dh = c.head_dim, Dr = c.rope_dim, W = c.sliding_window;
    const std::size_t row = c.dspark.tap_layers.size() * std::size_t(D);
    if (taps.size() % row) throw_internal("dspark_extend: taps do not hold whole positions");
    const int n = int(taps.size() / row);
    if (n == 0) return;
    // ctx = main_norm(main_proj · [h_a | h_b | h_c]) per position.
    std::vector<float> ctx(std::size_t(n) * D), kv(std::size_t(n) * Dh);
    gemm(pool_, w.main_proj, taps.data(), n, ctx.data());
    for (int t = 0; t < n; ++t)
        ops::rms_norm(&ctx[std::size_t(t) * D], D, w.main_norm.data(), c.rms_norm_eps, &ctx[std::size_t(t) * D]);
    for (std::size_t s = 0; s < w.stages.size(); ++s) {
        const AttentionWeights& a = w.stages[s].attn;
        gemm(pool_, a.wkv, ctx.data(), n, kv.data());
        for (int t = 0; t < n; ++t) {
            float* k = &kv[std::size_t(t) * Dh];
            ops::rms_norm(k, Dh, a.kv_norm.data(), c.rms_norm_eps, k);
            ops::rope(k + Dh - Dr, inv_freq_main_, st.position + t);
        }
        ring_store(st.stages[s].ring.data(), kv.data(), n, Dh, W, st.position);
    }
    st.position += n;
}

DsparkBlock Model::dspark_block(DsparkState& st, std::int32_t anchor) const {
    const ModelConfig& c = config_;
    const DsparkWeights& w = weights_.dspark;
    if (w.stages.empty()) throw_unsupported("the model has no DSpark stages");
    const int g = c.dspark.block_size, hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size;
    if (anchor < 0 || anchor >= V)
        throw_usage("token id " + std::to_string(anchor) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    std::vector<std::int32_t> ids(std::size_t(g), c.dspark.noise_token_id);
    ids[0] = anchor;
    // Embedding, copied into every stream, as the trunk's (§5.2 step 1).
    std::vector<float> x(std::size_t(g) * hc * D);
    for (int t = 0; t < g; ++t)
        for (int k = 0; k < hc; ++k)
            std::memcpy(&x[(std::size_t(t) * hc + k) * D], weights_.embed.row(ids[std::size_t(t)]), sizeof(float) * D);
    for (std::size_t s = 0; s < w.stages.size(); ++s)
        layer_forward(w.stages[s], c.num_layers + int(s), AttentionKind::sliding, false, st.stages[s], st.position, ids,
                      x, nullptr, st.routes, st.first);
    if (st.routes) st.routes->on_forward_end();
    DsparkBlock out;
    out.y.resize(std::size_t(g) * D);
    out.logits.resize(std::size_t(g) * V);
    hyper_head(w.hc_head, x.data(), g, out.y.data());
    std::vector<float> normed = out.y;
    norm_head_logits(w.norm, normed.data(), g, out.logits.data());
    return out;
}

void Model::dspark_markov(std::int32_t prev, std::span<float> logits) const {
    const DsparkWeights& w = weights_.dspark;
    const int V = config_.vocab_size;
    if (prev < 0 || prev >= V || int(logits.size()) != V) throw_internal("dspark_markov: bad token or logits");
    std::vector<float> correction(std::size_t(V), 0.0f);
    gemm(pool_, w.markov_w2, w.markov_w1.row(prev), 1, correction.data());
    for (int v = 0; v < V; ++v) logits[std::size_t(v)] += correction[std::size_t(v)];
}

float Model::dspark_confidence(std::span<const float> y, std::int32_t prev) const {
    const DsparkWeights& w = weights_.dspark;
    const int D = config_.hidden_size, r = w.markov_w1.cols;
    if (int(y.size()) != D || prev < 0 || prev >= config_.vocab_size) throw_internal("dspark_confidence: bad input");
    const float z = ops::dot(w.confidence.row(0), y.data(), D) + ops::dot(w.confidence.row(0) + D, w.markov_w1.row(prev), r);
    return ops::sigmoid(z);
}

}  // namespace aff
