// The CPU reference forward (see forward.hpp). Section numbers refer to the model doc
// (model-deepseek-v4.md). Written to be read: one function per block of the model,
// float32 throughout, every loop in the order the math is written. Parallel loops
// split work so each output value is computed by exactly one thread in a fixed order,
// which keeps results identical at any thread count.
#include "libaff/model/forward.hpp"

#include "libaff/model/attention_ops.hpp"
#include "libaff/model/gemm.hpp"
#include "libaff/model/ops.hpp"
#include "libaff/model/router.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace aff {

namespace {
using ops::dot;
using ops::rms_norm;
using ops::rope;
using ops::sigmoid;
using ops::silu;
using ops::softplus;

// mHC coefficients of one token (§3.2 steps 1-7): pre [n], post [n], comb [n, n].
void hc_coefficients(const HyperConnectionWeights& w, const float* mix_raw, const float* x, int nD, int hc,
                     double rms_eps, double hc_eps, int iters, float* pre, float* post, float* comb) {
    double ss = 0;
    for (int i = 0; i < nD; ++i) ss += double(x[i]) * x[i];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / nD + rms_eps));
    const float eps = static_cast<float>(hc_eps);
    for (int k = 0; k < hc; ++k) {
        pre[k] = sigmoid(mix_raw[k] * r * w.scale[0] + w.base[k]) + eps;
        post[k] = 2.0f * sigmoid(mix_raw[hc + k] * r * w.scale[1] + w.base[hc + k]);
    }
    float* C = comb;
    for (int i = 0; i < hc * hc; ++i) C[i] = mix_raw[2 * hc + i] * r * w.scale[2] + w.base[2 * hc + i];
    for (int a = 0; a < hc; ++a) {  // row softmax, then + eps
        float m = -std::numeric_limits<float>::infinity();
        for (int b = 0; b < hc; ++b) m = std::max(m, C[a * hc + b]);
        float s = 0;
        for (int b = 0; b < hc; ++b) s += (C[a * hc + b] = std::exp(C[a * hc + b] - m));
        for (int b = 0; b < hc; ++b) C[a * hc + b] = C[a * hc + b] / s + eps;
    }
    auto normalise_columns = [&] {
        for (int b = 0; b < hc; ++b) {
            float s = 0;
            for (int a = 0; a < hc; ++a) s += C[a * hc + b];
            for (int a = 0; a < hc; ++a) C[a * hc + b] /= s + eps;
        }
    };
    auto normalise_rows = [&] {
        for (int a = 0; a < hc; ++a) {
            float s = 0;
            for (int b = 0; b < hc; ++b) s += C[a * hc + b];
            for (int b = 0; b < hc; ++b) C[a * hc + b] /= s + eps;
        }
    };
    normalise_columns();
    for (int it = 1; it < iters; ++it) {
        normalise_rows();
        normalise_columns();
    }
}
// The relative margin of a top-k choice among scores[0 .. count): its k-th best chosen score
// against the best score left out (SelectionMargins); +inf when nothing was left out.
template <class Index>
double topk_margin(const float* scores, int count, const Index* chosen, int k) {
    if (k <= 0 || k >= count) return std::numeric_limits<double>::infinity();
    std::vector<char> taken(count, 0);
    double kth = std::numeric_limits<double>::infinity(), left = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < k; ++j) {
        taken[chosen[j]] = 1;
        kth = std::min(kth, double(scores[chosen[j]]));
    }
    for (int e = 0; e < count; ++e)
        if (!taken[e]) left = std::max(left, double(scores[e]));
    const double scale = std::max(std::fabs(kth), std::fabs(left));
    if (scale == 0.0) return std::numeric_limits<double>::infinity();  // two exact zeros: exact everywhere
    return (kth - left) / scale;
}

// DSpark's tap (§5.2): the plain mean of the hc streams of n tokens' x [n, hc, D] into slot
// `tap` of out [n, taps, D].
void stream_mean(const float* x, int n, int hc, int D, std::size_t tap, std::size_t taps, float* out) {
    const float inv = 1.0f / float(hc);
    for (int t = 0; t < n; ++t) {
        float* o = out + (std::size_t(t) * taps + tap) * D;
        const float* xt = x + std::size_t(t) * hc * D;
        for (int d = 0; d < D; ++d) {
            float sum = 0;
            for (int k = 0; k < hc; ++k) sum += xt[std::size_t(k) * D + d];
            o[d] = sum * inv;
        }
    }
}

}  // namespace

std::vector<float> rope_inv_freq(const RopeParameters& t, int rope_dim) {
    const int half = rope_dim / 2;
    std::vector<float> inv(half);
    // Computed as torch does (float32 powers) so angles match the oracle closely.
    for (int j = 0; j < half; ++j) inv[j] = 1.0f / std::pow(static_cast<float>(t.theta), static_cast<float>(2 * j) / rope_dim);
    if (!t.yarn) return inv;
    // YaRN (§3.3): pairs rotating fewer than beta_slow times over the original context
    // are interpolated (divided by factor), those above beta_fast kept, linear between.
    auto correction_dim = [&](double rotations) {
        return rope_dim * std::log(t.original_max_position / (rotations * 2 * M_PI)) / (2 * std::log(t.theta));
    };
    double low = std::max(0.0, std::floor(correction_dim(t.beta_fast)));
    double high = std::min(double(rope_dim - 1), std::ceil(correction_dim(t.beta_slow)));
    if (low == high) high += 0.001;
    for (int j = 0; j < half; ++j) {
        const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
        const float extrapolation = static_cast<float>(1.0 - ramp);
        const float interpolated = inv[j] / static_cast<float>(t.factor);
        inv[j] = interpolated * (1 - extrapolation) + inv[j] * extrapolation;
    }
    return inv;
}

Model::Model(ModelConfig config, ModelWeights weights, ThreadPool& pool, ForwardOptions options)
    : config_(std::move(config)), weights_(std::move(weights)), pool_(pool), options_(options) {
    inv_freq_main_ = rope_inv_freq(config_.rope_main, config_.rope_dim);
    inv_freq_compress_ = rope_inv_freq(config_.rope_compress, config_.rope_dim);
    if (config_.rope_main.attention_factor != 1.0 || config_.rope_compress.attention_factor != 1.0)
        throw_unsupported("RoPE attention_factor other than 1 (V4 applies no mscale)");
}

LayerState Model::layer_state(const LayerWeights& w) const {
    const ModelConfig& c = config_;
    LayerState s;
    s.ring.assign(std::size_t(c.sliding_window) * c.head_dim, 0.0f);
    auto init = [](const CompressorWeights& cw, CompressorState& cs) {
        const int width = cw.overlap ? 2 * cw.dim : cw.dim;
        cs.pending_kv.assign(std::size_t(cw.ratio) * width, 0.0f);
        cs.pending_gate.assign(std::size_t(cw.ratio) * width, 0.0f);
        cs.prev_kv.assign(std::size_t(cw.ratio) * cw.dim, 0.0f);
        cs.prev_gate.assign(std::size_t(cw.ratio) * cw.dim, 0.0f);
    };
    if (w.attn.has_compressor) init(w.attn.compressor, s.compressor);
    if (w.attn.has_indexer) init(w.attn.index_compressor, s.indexer);
    return s;
}

DecodeState Model::new_state() const {
    DecodeState st;
    for (const LayerWeights& w : weights_.layers) st.layers.push_back(layer_state(w));
    for (const MtpWeights& m : weights_.mtp) st.mtp.push_back(layer_state(m.layer));
    return st;
}

// §3.5 / §4.3 step 2: project the chunk's tokens, append them to the pending window,
// and emit one entry each time a window of `ratio` tokens completes.
void Model::compress(const CompressorWeights& w, CompressorState& st, std::int64_t start, int n, const float* a) const {
    const int width = w.overlap ? 2 * w.dim : w.dim;
    std::vector<float> kv(std::size_t(n) * width), gate(std::size_t(n) * width);
    gemm(pool_, w.wkv, a, n, kv.data());
    gemm(pool_, w.wgate, a, n, gate.data());
    const CompressorParams params{w.ratio, w.dim, w.overlap, w.ape.w.data(), w.norm.data(), config_.rms_norm_eps,
                                  &inv_freq_compress_};
    compress_tokens(params, st, start, n, kv.data(), gate.data());
}

// §3.4-3.8: attention of n tokens at positions start.. over the sliding window and,
// for CSA/HCA layers, the compressed entries visible to each query.
// A shard computes only its output groups' heads and its share of wo_b's product (a partial
// sum of out); the replicated parts (q_a, the latent, compressor, indexer, ring) run whole.
void Model::attention(const LayerWeights& lw, AttentionKind kind, LayerState& st, std::int64_t start, int n,
                      const float* a, float* out, SelectionMargins* margins, const SubLayerShard& shard,
                      std::int64_t block_ring_first) const {
    const ModelConfig& c = config_;
    const AttentionWeights& w = lw.attn;
    const int Dh = c.head_dim, Dr = c.rope_dim, Rq = c.q_lora_rank, W = c.sliding_window;
    const int G = c.o_groups, g0 = shard.group_first, g1 = shard.group_end < 0 ? G : shard.group_end;
    if (g0 < 0 || g1 > G || g0 > g1) throw_internal("attention: output groups out of range");
    const int H = (g1 - g0) * (c.num_heads / G), h0 = g0 * (c.num_heads / G);  // this shard's heads
    const std::vector<float>& inv_freq = kind == AttentionKind::sliding ? inv_freq_main_ : inv_freq_compress_;

    // Query path: low-rank q, per-head unweighted RMS norm, RoPE on the trailing Dr.
    std::vector<float> cq(std::size_t(n) * Rq), q(std::size_t(n) * H * Dh), kv(std::size_t(n) * Dh);
    gemm(pool_, w.wq_a, a, n, cq.data());
    for (int t = 0; t < n; ++t) rms_norm(&cq[std::size_t(t) * Rq], Rq, w.q_norm.data(), c.rms_norm_eps, &cq[std::size_t(t) * Rq]);
    gemm(pool_, w.wq_b.row(h0 * Dh), H * Dh, Rq, cq.data(), Rq, n, q.data(), H * Dh);
    // The single latent that is both key and value.
    gemm(pool_, w.wkv, a, n, kv.data());
    for (int t = 0; t < n; ++t) {
        for (int h = 0; h < H; ++h) {
            float* qh = &q[(std::size_t(t) * H + h) * Dh];
            rms_norm(qh, Dh, nullptr, c.rms_norm_eps, qh);
            rope(qh + Dh - Dr, inv_freq, start + t);
        }
        float* k = &kv[std::size_t(t) * Dh];
        rms_norm(k, Dh, w.kv_norm.data(), c.rms_norm_eps, k);
        rope(k + Dh - Dr, inv_freq, start + t);
    }

    // Compressed entries (all windows completed inside this chunk are emitted first;
    // the visibility rule keeps each query causal). HCA: every visible entry.
    AttendEntries entries;
    std::vector<std::int32_t> index, index_count;
    if (w.has_compressor) {
        compress(w.compressor, st.compressor, start, n, a);
        if (kind == AttentionKind::hca || w.has_indexer)
            entries = {st.compressor.entries.data(), st.compressor.count, w.compressor.ratio};
    }
    if (w.has_indexer) {
        // §3.7 Lightning indexer: score visible indexer keys, keep the top index_topk.
        compress(w.index_compressor, st.indexer, start, n, a);
        const int Hi = c.index_heads, Di = c.index_head_dim, r = w.index_compressor.ratio, count = st.indexer.count;
        std::vector<float> qi(std::size_t(n) * Hi * Di), wi(std::size_t(n) * Hi), scores(std::size_t(n) * count);
        gemm(pool_, w.index_wq_b, cq.data(), n, qi.data());
        gemm(pool_, w.index_weights, a, n, wi.data());
        for (int t = 0; t < n; ++t)
            for (int h = 0; h < Hi; ++h) rope(&qi[(std::size_t(t) * Hi + h) * Di] + Di - Dr, inv_freq_compress_, start + t);
        index_scores(pool_, n, start, Hi, Di, r, count, qi.data(), wi.data(), st.indexer.entries.data(), scores.data(),
                     count);
        const int k = std::max(1, std::min(c.index_topk, count));
        index.assign(std::size_t(n) * k, 0);
        index_count.assign(n, 0);
        pool_.parallel_for(std::size_t(n), [&](std::size_t t0, std::size_t t1) {
            for (std::size_t t = t0; t < t1; ++t)
                index_count[t] = select_topk(&scores[t * count], visible_entries(count, start + std::int64_t(t), r),
                                             c.index_topk, &index[t * k]);
        });
        if (margins)
            for (int t = 0; t < n; ++t)
                margins->note(start + t, topk_margin(&scores[std::size_t(t) * count],
                                                     visible_entries(count, start + std::int64_t(t), r),
                                                     &index[std::size_t(t) * k], index_count[t]));
        entries.index = index.data();
        entries.index_count = index_count.data();
        entries.stride = k;
    }

    // Scores with the per-head sink in the denominator, then the conjugate rotation.
    // A DSpark draft block (block_ring_first >= 0) sees the confirmed ring and its whole block,
    // and leaves the ring as it was: its keys are guesses, not the trunk's.
    std::vector<float> o(std::size_t(n) * H * Dh);
    const bool block = block_ring_first >= 0;
    if (H > 0 && block)
        attend_block(pool_, AttendShape{n, H, Dh, W, start}, q.data(), kv.data(), st.ring.data(), block_ring_first,
                     w.sink.data() + h0, o.data());
    else if (H > 0)
        attend(pool_, AttendShape{n, H, Dh, W, start}, q.data(), kv.data(), st.ring.data(), entries,
               w.sink.data() + h0, o.data());
    for (int t = 0; t < n; ++t)
        for (int h = 0; h < H; ++h) rope(&o[(std::size_t(t) * H + h) * Dh] + Dh - Dr, inv_freq, start + t, /*inverse=*/true);
    // The ring keeps the last W latents (written after all queries have read it).
    if (!block) ring_store(st.ring.data(), kv.data(), n, Dh, W, start);

    // Grouped low-rank output projection: group g maps its H/G heads through wo_a[g].
    const int Gs = g1 - g0, Ro = c.o_lora_rank, group_in = c.num_heads * Dh / G, D = c.hidden_size;
    if (Gs == 0) {
        std::fill(out, out + std::size_t(n) * D, 0.0f);
        return;
    }
    std::vector<float> z(std::size_t(n) * Gs * Ro);
    for (int g = 0; g < Gs; ++g)
        gemm(pool_, w.wo_a.row((g0 + g) * Ro), Ro, group_in, o.data() + std::size_t(g) * group_in, H * Dh, n,
             z.data() + std::size_t(g) * Ro, Gs * Ro);
    gemm(pool_, w.wo_b.w.data() + std::size_t(g0) * Ro, D, Gs * Ro, z.data(), Gs * Ro, n, out, D, G * Ro);
}

void Model::attention_block(int layer, LayerState& st, std::int64_t start, int n, const float* a, float* out,
                            const SubLayerShard& shard) const {
    if (layer < 0 || layer >= config_.num_layers) throw_internal("attention_block: layer out of range");
    attention(weights_.layers[layer], config_.attention[layer], st, start, n, a, out, nullptr, shard);
}

void Model::moe_block(int layer, std::span<const std::int32_t> tokens, std::int64_t start, const float* b, float* out,
                      const SubLayerShard& shard) const {
    if (layer < 0 || layer >= config_.num_layers) throw_internal("moe_block: layer out of range");
    moe(weights_.layers[layer].ffn, layer, config_.hash_routed[layer], tokens, b, out, start, nullptr, nullptr, shard);
}

// §3.9: router (router.hpp: sqrtsoftplus; bias for selection only, or tid2eid for hash
// layers), routed SwiGLU experts with clamps, shared expert.
// A shard computes the router whole, then only its intermediate rows of the shared expert and
// either its rows of every routed expert (halved) or its own experts whole (shard.owned).
void Model::moe(const FfnWeights& w, int layer_index, bool hash, std::span<const std::int32_t> tokens, const float* b,
                float* out, std::int64_t start, SelectionMargins* margins, RouteObserver* routes,
                const SubLayerShard& shard) const {
    const ModelConfig& c = config_;
    const int n = int(tokens.size()), E = c.n_routed_experts, k = c.experts_per_token, I = c.moe_intermediate_size,
              D = c.hidden_size;
    const int row0 = shard.inter_first, row1 = shard.inter_end < 0 ? I : shard.inter_end, Is = row1 - row0;
    if (row0 < 0 || row1 > I || row0 > row1) throw_internal("moe: intermediate rows out of range");
    if (shard.owned && int(shard.owned->size()) != E) throw_internal("moe: expert owners do not match the layer");
    const bool routed_rows = !shard.owned && Is < I;  // halved experts: only this shard's rows
    const float limit = static_cast<float>(c.swiglu_limit);
    std::vector<std::int32_t> chosen;
    std::vector<float> gates, keys(margins && !hash ? std::size_t(n) * E : 0);
    router_choice(w, hash, tokens, b, chosen, gates, keys.empty() ? nullptr : keys.data());
    if (!keys.empty())
        for (int t = 0; t < n; ++t)
            margins->note(start + t, topk_margin(&keys[std::size_t(t) * E], E, &chosen[std::size_t(t) * k], k));
    if (routes) routes->on_route(RouteEvent{layer_index, start, tokens, k, chosen, gates});
    std::fill(out, out + std::size_t(n) * D, 0.0f);
    if (!options_.no_routed_experts) {
        std::vector<float> routed(std::size_t(n) * k * D);
        const ExpertSource& experts = *weights_.experts;
        pool_.parallel_for(std::size_t(n) * k, [&](std::size_t i0, std::size_t i1) {
            std::vector<float> h1(I), h3(I);
            for (std::size_t i = i0; i < i1; ++i) {
                const float* x = b + (i / k) * D;
                const int e = chosen[i];
                if (shard.owned && !(*shard.owned)[e]) continue;  // another rank's expert: adds zero
                experts.matvec(layer_index, e, ExpertMatrix::w1, x, h1.data());
                experts.matvec(layer_index, e, ExpertMatrix::w3, x, h3.data());
                for (int j = 0; j < I; ++j) h1[j] = silu(std::min(h1[j], limit)) * std::clamp(h3[j], -limit, limit);
                // Rows of other ranks left out of w2's product (exact zeros: the sum is this shard's).
                if (routed_rows)
                    for (int j = 0; j < I; ++j)
                        if (j < row0 || j >= row1) h1[j] = 0.0f;
                float* y = &routed[i * D];
                experts.matvec(layer_index, e, ExpertMatrix::w2, h1.data(), y);
                for (int d = 0; d < D; ++d) y[d] *= gates[i];
            }
        });
        for (int t = 0; t < n; ++t)
            for (int j = 0; j < k; ++j)
                for (int d = 0; d < D; ++d) out[std::size_t(t) * D + d] += routed[(std::size_t(t) * k + j) * D + d];
    }
    if (w.has_shared && Is > 0) {
        std::vector<float> g1(std::size_t(n) * Is), g3(std::size_t(n) * Is), y(std::size_t(n) * D);
        gemm(pool_, w.shared_w1.row(row0), Is, D, b, D, n, g1.data(), Is);
        gemm(pool_, w.shared_w3.row(row0), Is, D, b, D, n, g3.data(), Is);
        for (std::size_t i = 0; i < g1.size(); ++i) g1[i] = silu(std::min(g1[i], limit)) * std::clamp(g3[i], -limit, limit);
        gemm(pool_, w.shared_w2.w.data() + row0, D, Is, g1.data(), Is, n, y.data(), D, I);
        for (std::size_t i = 0; i < y.size(); ++i) out[i] += y[i];
    }
}

void Model::router_choice(const FfnWeights& w, bool hash, std::span<const std::int32_t> tokens, const float* b,
                          std::vector<std::int32_t>& chosen, std::vector<float>& gates, float* keys) const {
    const ModelConfig& c = config_;
    const int n = int(tokens.size()), E = c.n_routed_experts, k = c.experts_per_token;
    std::vector<float> logits(std::size_t(n) * E);
    gemm(pool_, w.gate, b, n, logits.data());
    chosen.assign(std::size_t(n) * k, 0);
    gates.assign(std::size_t(n) * k, 0.0f);
    const RouterShape shape{E, k, static_cast<float>(c.routed_scaling_factor), c.norm_topk_prob};
    route(logits.data(), n, shape, hash ? nullptr : w.bias.data(), hash ? w.tid2eid.data() : nullptr, tokens.data(),
          chosen.data(), gates.data(), keys);
}

// One decoder layer (§3.2 "Decoder layer"): mHC around attention, then around the MoE.
void Model::layer_forward(const LayerWeights& w, int layer_index, AttentionKind kind, bool hash, LayerState& st,
                          std::int64_t start, std::span<const std::int32_t> tokens, std::vector<float>& x,
                          SelectionMargins* margins, RouteObserver* routes, std::int64_t block_ring_first,
                          RouteObserver* predicted) const {
    const ModelConfig& c = config_;
    const int n = int(tokens.size()), hc = c.hc_mult, D = c.hidden_size, nD = hc * D, M = c.mix_width();
    std::vector<float> mix(std::size_t(n) * M), pre(std::size_t(n) * hc), post(std::size_t(n) * hc),
        comb(std::size_t(n) * hc * hc), u(std::size_t(n) * D), f(std::size_t(n) * D);
    auto collapse = [&](const HyperConnectionWeights& hw, const std::vector<float>& norm) {
        gemm(pool_, hw.fn, x.data(), n, mix.data());
        for (int t = 0; t < n; ++t) {
            const float* xt = &x[std::size_t(t) * nD];
            hc_coefficients(hw, &mix[std::size_t(t) * M], xt, nD, hc, c.rms_norm_eps, c.hc_eps, c.hc_sinkhorn_iters,
                            &pre[std::size_t(t) * hc], &post[std::size_t(t) * hc], &comb[std::size_t(t) * hc * hc]);
            float* ut = &u[std::size_t(t) * D];
            std::fill(ut, ut + D, 0.0f);
            for (int k = 0; k < hc; ++k)
                for (int d = 0; d < D; ++d) ut[d] += pre[std::size_t(t) * hc + k] * xt[std::size_t(k) * D + d];
            rms_norm(ut, D, norm.data(), c.rms_norm_eps, ut);
        }
    };
    // New stream b = post_b · f + Σ_a comb[a][b] · X[a]: column b of comb (§3.2 step 10).
    auto expand = [&] {
        std::vector<float> old(nD);
        for (int t = 0; t < n; ++t) {
            float* xt = &x[std::size_t(t) * nD];
            std::copy(xt, xt + nD, old.begin());
            const float* C = &comb[std::size_t(t) * hc * hc];
            for (int bs = 0; bs < hc; ++bs)
                for (int d = 0; d < D; ++d) {
                    float v = post[std::size_t(t) * hc + bs] * f[std::size_t(t) * D + d];
                    for (int as = 0; as < hc; ++as) v += C[as * hc + bs] * old[std::size_t(as) * D + d];
                    xt[std::size_t(bs) * D + d] = v;
                }
        }
    };
    if (predicted && !hash) {
        // The prefetch predictor (DecodeState::predicted_routes): the FFN collapse of the
        // streams as they enter, routed. The attention's collapse below recomputes everything
        // this writes (mix, pre, post, comb, u) from the unchanged x.
        collapse(w.hc_ffn, w.ffn_norm);
        std::vector<std::int32_t> chosen;
        std::vector<float> gates;
        router_choice(w.ffn, false, tokens, u.data(), chosen, gates, nullptr);
        predicted->on_route(RouteEvent{layer_index, start, tokens, c.experts_per_token, chosen, gates});
    }
    collapse(w.hc_attn, w.attn_norm);
    attention(w, kind, st, start, n, u.data(), f.data(), margins, SubLayerShard{}, block_ring_first);
    expand();
    collapse(w.hc_ffn, w.ffn_norm);
    moe(w.ffn, layer_index, hash, tokens, u.data(), f.data(), start, margins, routes, SubLayerShard{});
    expand();
}

// §3.2 hyper head for n tokens' streams: y [n, D], before the final norm.
void Model::hyper_head(const HyperHeadWeights& hw, const float* x, int n, float* y) const {
    const ModelConfig& c = config_;
    const int hc = c.hc_mult, D = c.hidden_size, nD = hc * D;
    std::vector<float> mix(std::size_t(n) * hc);
    gemm(pool_, hw.fn, x, n, mix.data());
    for (int t = 0; t < n; ++t) {
        const float* xt = x + std::size_t(t) * nD;
        double ss = 0;
        for (int i = 0; i < nD; ++i) ss += double(xt[i]) * xt[i];
        const float r = static_cast<float>(1.0 / std::sqrt(ss / nD + c.rms_norm_eps));
        float* yt = y + std::size_t(t) * D;
        std::fill(yt, yt + D, 0.0f);
        for (int k = 0; k < hc; ++k) {
            const float p = sigmoid(mix[std::size_t(t) * hc + k] * r * hw.scale[0] + hw.base[k]) + float(c.hc_eps);
            for (int d = 0; d < D; ++d) yt[d] += p * xt[std::size_t(k) * D + d];
        }
    }
}

// §3.10 final norm and LM head of hyper-head outputs y [n, D] (normalised in place).
void Model::norm_head_logits(const std::vector<float>& norm, float* y, int n, float* logits) const {
    const int D = config_.hidden_size;
    for (int t = 0; t < n; ++t) rms_norm(y + std::size_t(t) * D, D, norm.data(), config_.rms_norm_eps, y + std::size_t(t) * D);
    gemm(pool_, weights_.head, y, n, logits);
}

void Model::hyper_head_logits(const HyperHeadWeights& hw, const std::vector<float>& norm, const float* x, int n,
                              float* logits) const {
    std::vector<float> y(std::size_t(n) * config_.hidden_size);
    hyper_head(hw, x, n, y.data());
    norm_head_logits(norm, y.data(), n, logits);
}

std::vector<float> Model::forward(DecodeState& st, std::span<const std::int32_t> tokens, bool all_logits,
                                  std::vector<float>* streams_out) const {
    const ModelConfig& c = config_;
    const int n = int(tokens.size()), hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size;
    if (n == 0) throw_usage("forward: no tokens");
    for (std::int32_t t : tokens)
        if (t < 0 || t >= V) throw_usage("token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    if (st.layers.size() != weights_.layers.size()) throw_internal("forward: decode state belongs to another model");
    // Embedding, copied into every stream (§3.0).
    std::vector<float> x(std::size_t(n) * hc * D);
    for (int t = 0; t < n; ++t)
        for (int k = 0; k < hc; ++k)
            std::memcpy(&x[(std::size_t(t) * hc + k) * D], weights_.embed.row(tokens[t]), sizeof(float) * D);
    const int layers = options_.max_layers < 0 ? c.num_layers : std::min(options_.max_layers, c.num_layers);
    const std::vector<int>& taps = c.dspark.tap_layers;
    if (st.taps) st.taps->assign(std::size_t(n) * taps.size() * D, 0.0f);
    for (int l = 0; l < layers; ++l) {
        layer_forward(weights_.layers[l], l, c.attention[l], c.hash_routed[l], st.layers[l], st.position, tokens, x,
                      st.margins, st.routes, -1, st.predicted_routes);
        // DSpark taps (§5.2): the plain mean of the streams after a tap layer.
        const auto tap = std::find(taps.begin(), taps.end(), l);
        if (st.taps && tap != taps.end())
            stream_mean(x.data(), n, hc, D, std::size_t(tap - taps.begin()), taps.size(), st.taps->data());
    }
    if (st.routes) st.routes->on_forward_end();
    st.position += n;
    if (streams_out) *streams_out = x;
    const int first = all_logits ? 0 : n - 1;
    std::vector<float> logits(std::size_t(n - first) * V);
    hyper_head_logits(weights_.hc_head, weights_.norm, &x[std::size_t(first) * hc * D], n - first, logits.data());
    return logits;
}

std::vector<float> Model::mtp_forward(DecodeState& st, std::span<const float> streams,
                                      std::span<const std::int32_t> next_tokens, bool all_logits,
                                      std::vector<float>* streams_out) const {
    const ModelConfig& c = config_;
    if (weights_.mtp.empty()) throw_unsupported("the checkpoint has no MTP layer");
    const MtpWeights& m = weights_.mtp[0];
    const int n = int(next_tokens.size()), hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size;
    if (n == 0) throw_usage("mtp_forward: no tokens");
    if (streams.size() != std::size_t(n) * hc * D) throw_internal("mtp_forward: streams do not match the tokens");
    for (std::int32_t t : next_tokens)
        if (t < 0 || t >= V) throw_usage("token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    // X0[k] = h_proj · hnorm(H[k]) + e_proj · enorm(embed[next token]) (§5.1 step 3).
    std::vector<float> e(std::size_t(n) * D), ep(std::size_t(n) * D), h(std::size_t(n) * hc * D), x(std::size_t(n) * hc * D);
    for (int t = 0; t < n; ++t) rms_norm(weights_.embed.row(next_tokens[t]), D, m.enorm.data(), c.rms_norm_eps, &e[std::size_t(t) * D]);
    gemm(pool_, m.e_proj, e.data(), n, ep.data());
    for (std::size_t i = 0; i < std::size_t(n) * hc; ++i) rms_norm(&streams[i * D], D, m.hnorm.data(), c.rms_norm_eps, &h[i * D]);
    gemm(pool_, m.h_proj, h.data(), n * hc, x.data());
    for (int t = 0; t < n; ++t)
        for (int k = 0; k < hc; ++k)
            for (int d = 0; d < D; ++d) x[(std::size_t(t) * hc + k) * D + d] += ep[std::size_t(t) * D + d];
    // Its routing, when observed, is one call of layer num_layers (a route trace's draft layer);
    // its router's margins, when asked, go by MTP position (the GPU's MTP routing is held to it).
    layer_forward(m.layer, c.num_layers, AttentionKind::sliding, false, st.mtp[0], st.mtp_position, next_tokens, x,
                  st.margins, st.routes);
    if (st.routes) st.routes->on_forward_end();
    st.mtp_position += n;
    if (streams_out) *streams_out = x;
    const int first = all_logits ? 0 : n - 1;
    std::vector<float> logits(std::size_t(n - first) * V);
    hyper_head_logits(m.hc_head, m.norm, &x[std::size_t(first) * hc * D], n - first, logits.data());
    return logits;
}

void SelectionMargins::note(std::int64_t position, double margin) {
    if (position < 0) return;
    if (by_position.size() <= std::size_t(position))
        by_position.resize(std::size_t(position) + 1, std::numeric_limits<double>::infinity());
    by_position[std::size_t(position)] = std::min(by_position[std::size_t(position)], margin);
}

}  // namespace aff
