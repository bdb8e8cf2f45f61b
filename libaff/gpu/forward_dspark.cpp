// DSpark's stages on the GPU (forward.hpp: has_dspark .. dspark_ring; model doc §5.2, the
// CPU's Model::dspark_* step by step, libaff/model/dspark_forward.cpp). As the MTP layer
// (forward_mtp.cpp), the stages are uploaded beside the trunk as layers num_layers + s, their
// routed experts as those layers of the expert table, and run by the trunk's own layer code;
// their rings live in the DSpark state's buffer. The ring fill (dspark_extend) takes the
// trunk's taps from the host (3·D floats a position, cheap beside a trunk step) through
// main_proj, main_norm and each stage's kv projection, norm and RoPE into the ring; the block
// (dspark_block) runs the stages with the attention kernel's block mode (forward_attention.cpp:
// the ring's confirmed positions and the whole block, the ring left as it is), then the last
// stage's hyper head, norm and the shared head: logits and y stay on the device. The Markov
// correction of a guess is one GEMV of markov_w2 over markov_w1[prev] (its row copied from the
// host) added to the logits row, and only that row comes back; the confidence head is a dot
// over D + r floats, done by the caller on the host from dspark_y's row (Model::dspark_confidence,
// the CPU's own arithmetic). That is the sampled path's, whose draws are the host's. At
// temperature 0 dspark_greedy runs the whole chain on the device instead: markov_w1 is on the
// device too, each guess's row gathered by the previous guess's id, the corrected row's argmax
// (kernels/argmax.hpp) the next prev, and the confidence head one GEMV over [y_i | w1[prev]];
// only the ids and the heads' γ floats come back, in one copy.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "libaff/gpu/forward_rope.hpp"
#include "libaff/model/ops.hpp"
#include "kernels/argmax.hpp"
#include "kernels/sample_rows.hpp"
#include "kernels/attention.hpp"
#include "kernels/embed.hpp"
#include "kernels/rms_norm.hpp"

#include <algorithm>
#include <cstring>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::plan_dspark(const TensorReader* ck) {
    if (!mtp_experts_why_not.empty()) {
        dspark_why_not = mtp_experts_why_not;
        return;
    }
    const DsparkWeights& w = cpu.weights().dspark;
    const int L = c.num_layers, S = int(w.stages.size()), W = c.sliding_window, g = c.dspark.block_size;
    const std::size_t D = c.hidden_size, V = c.vocab_size, taps = c.dspark.tap_layers.size();
    if (g < 1 || g > kScratchTokens) {
        dspark_why_not = "block size " + std::to_string(g) + " outside 1.." + std::to_string(kScratchTokens);
        return;
    }
    dspark.stages = S;
    for (int s = 0; s < S; ++s)
        layers[L + s] = put_layer(w.stages[s], "mtp." + std::to_string(s) + ".", L + s, false, ck);
    dspark.main_proj = put_linear(w.main_proj, "mtp.0.main_proj.weight", ck);
    dspark.main_norm = put_vec(w.main_norm);
    dspark.norm = put_vec(w.norm);
    dspark.hc_head_fn = put_vec(w.hc_head.fn.w);
    dspark.hc_head_base = put_vec(w.hc_head.base);
    dspark.hc_head_scale = put_vec(w.hc_head.scale);
    dspark.markov_w2 = put_dense(w.markov_w2, plan.dense_bytes);
    dspark.markov_w1 = put_dense(w.markov_w1, plan.dense_bytes);  // exact: bf16 only where the values are
    dspark.confidence = put_dense(w.confidence, plan.dense_bytes);
    // Not put_vec: that keeps a reference to its vector until the arena's upload, and a
    // temporary is gone by then (the tiered load's first device run read freed memory here).
    dspark.ones = reserve(2 * sizeof(float), plan.dense_bytes);
    uploads.push_back({dspark.ones, 2 * sizeof(float), [](std::uint8_t* dst) {
                           const float ones[2] = {1.0f, 1.0f};
                           std::memcpy(dst, ones, sizeof ones);
                       }});
    // The DSpark state's buffer.
    std::size_t at = 0;
    auto take = [&](std::size_t floats) {
        const std::size_t offset = at;
        at += align_up(floats * 4);
        return offset;
    };
    dspark.rings.clear();
    for (int s = 0; s < S; ++s) dspark.rings.push_back(take(std::size_t(W) * c.head_dim));
    dspark.taps = take(std::size_t(kDsparkChunk) * taps * D);
    dspark.ctx = take(std::size_t(kDsparkChunk) * D);
    dspark.kv = take(std::size_t(kDsparkChunk) * c.head_dim);
    dspark.logits = take(std::size_t(g) * V);
    dspark.y = take(std::size_t(g) * D);
    dspark.w1 = take(std::size_t(w.markov_w1.cols));
    dspark.correction = take(V);
    dspark.row = take(V);
    dspark.ids = take(std::size_t(g) + 1);
    dspark.conf_in = take(D + std::size_t(w.markov_w1.cols));
    dspark.z = take(std::size_t(g));
    dspark.bytes = at;
    has_dspark = true;  // plan_state, which runs after the weights, points state_refs[L + s] at the rings
}

GpuModel::Impl& GpuModel::dspark_part(const GpuDsparkState* st, const char* what) const {
    Impl& m = *shards_.front();
    if (shards_.size() != 1 || !m.has_dspark)
        throw_unsupported(std::string(what) + ": DSpark's stages are not on the GPU (" + dspark_why_not() + ")");
    if (st && st->device.size() < m.dspark.bytes) throw_internal(std::string(what) + ": not a DSpark state of this model");
    use_device(m.device);
    return m;
}

bool GpuModel::has_dspark() const { return shards_.size() == 1 && shards_.front()->has_dspark; }

std::string GpuModel::dspark_why_not() const {
    if (has_dspark()) return {};
    return shards_.size() != 1 ? "the layers are split across GPUs" : shards_.front()->dspark_why_not;
}

bool GpuModel::dspark_experts_in_host() const {
    return has_dspark() && shards_.front()->experts_codebook && shards_.front()->mtp_experts_in_host(config());
}

GpuDsparkState GpuModel::new_dspark_state(std::int64_t position) const {
    Impl& m = dspark_part(nullptr, "new_dspark_state");
    GpuDsparkState st;
    st.device = Buffer(m.dspark.bytes);
    m.stream.fill(st.device.data(), 0, m.dspark.bytes);
    m.stream.synchronize();
    st.first = st.position = position;
    return st;
}

void GpuModel::dspark_restart(GpuDsparkState& st, std::int64_t position) const {
    Impl& m = dspark_part(&st, "dspark_restart");
    const std::size_t ring = std::size_t(m.c.sliding_window) * m.c.head_dim * 4;
    for (std::size_t r : m.dspark.rings) m.stream.fill(st.device.as<std::uint8_t>() + r, 0, ring);
    st.first = st.position = position;
    st.has_block = false;
}

void GpuModel::dspark_extend(GpuDsparkState& st, std::span<const float> taps) {
    Impl& m = dspark_part(&st, "dspark_extend");
    const ModelConfig& c = m.c;
    const int D = c.hidden_size, Dh = c.head_dim, W = c.sliding_window, L = c.num_layers;
    const std::size_t row = c.dspark.tap_layers.size() * std::size_t(D);
    if (taps.size() % row) throw_internal("dspark_extend: taps do not hold whole positions");
    const int n = int(taps.size() / row);
    if (n == 0) return;
    void* s = m.stream.handle();
    const float eps = static_cast<float>(c.rms_norm_eps);
    m.ensure_scratch(Impl::kDsparkChunk);  // positions for a pass
    m.prefill_call = false;                // GEMVs: fp32 activations, as the CPU's
    m.steps.layer = -1;
    std::uint8_t* b = st.device.as<std::uint8_t>();
    float* in = reinterpret_cast<float*>(b + m.dspark.taps);
    float* ctx = reinterpret_cast<float*>(b + m.dspark.ctx);
    float* kv = reinterpret_cast<float*>(b + m.dspark.kv);
    std::vector<std::int32_t> pos(Impl::kDsparkChunk);
    for (int t0 = 0; t0 < n; t0 += Impl::kDsparkChunk) {
        const int k = std::min(Impl::kDsparkChunk, n - t0);
        const std::int64_t at = st.position + t0;
        for (int t = 0; t < k; ++t) pos[std::size_t(t)] = static_cast<std::int32_t>(at + t);
        m.stream.copy(in, taps.data() + std::size_t(t0) * row, std::size_t(k) * row * 4);
        m.stream.copy(m.positions, pos.data(), std::size_t(k) * 4);
        // ctx = main_norm(main_proj · [h_a | h_b | h_c]).
        m.apply(m.dspark.main_proj, in, int(row), k, ctx, D);
        rms_norm(ctx, m.at<float>(m.dspark.main_norm), ctx, k, D, eps, s);
        for (int sg = 0; sg < m.dspark.stages; ++sg) {
            const AttentionRefs& a = m.layers[L + sg].attn;
            m.apply(a.wkv, ctx, D, k, kv, Dh);
            rms_norm_rope_with_inv_freq(kv, m.at<float>(a.kv_norm), kv, k, 1, Dh, eps, m.positions, m.inv_freq_main, s);
            ring_store(reinterpret_cast<float*>(b + m.dspark.rings[std::size_t(sg)]), kv, k, Dh, W, at, s);
        }
        m.stream.synchronize();  // the pageable sources (pos, taps) before the next pass reuses them
    }
    st.position += n;
}

void GpuModel::dspark_block(GpuDsparkState& st, std::int32_t anchor) {
    Impl& m = dspark_part(&st, "dspark_block");
    const ModelConfig& c = m.c;
    const int g = c.dspark.block_size, hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size, L = c.num_layers;
    if (anchor < 0 || anchor >= V)
        throw_usage("token id " + std::to_string(anchor) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    void* s = m.stream.handle();
    const float eps = static_cast<float>(c.rms_norm_eps);
    m.ensure_scratch(g);
    m.prefill_call = false;
    m.steps.layer = -1;
    std::vector<std::int32_t> ids(std::size_t(g), c.dspark.noise_token_id), pos(static_cast<std::size_t>(g));
    ids[0] = anchor;
    for (int t = 0; t < g; ++t) pos[std::size_t(t)] = static_cast<std::int32_t>(st.position + t);
    m.stream.copy(m.tokens_dev, ids.data(), std::size_t(g) * 4);
    m.stream.copy(m.positions, pos.data(), std::size_t(g) * 4);
    // The embedding on every stream, as the trunk's; the stages on the rings in block mode.
    gpu::embed(m.at<void>(m.embed.offset), m.embed.type, D, m.tokens_dev, g, hc, m.x, s);
    std::uint8_t* b = st.device.as<std::uint8_t>();
    const Seq seq{b, st.position, g, 0, nullptr};
    bool pending = false;
    m.block_ring_first = st.first;
    try {
        if (routes_) m.dspark_routes.resize(std::size_t(m.dspark.stages));
        for (int sg = 0; sg < m.dspark.stages; ++sg) {
            pending = m.run_layer(L + sg, std::span<const Seq>(&seq, 1), g, pending, nullptr);
            // Observed: the stage's routing, still in the router's outputs (the next stage's
            // router rewrites them, after this copy in stream order), comes back with the
            // logits' wait. Not into the route ring or the mover: the draft's experts are not
            // the tier engine's (as the MTP layer's, forward_mtp.cpp).
            if (routes_)
                m.dspark_routes[std::size_t(sg)].drain(m.route_ids, m.route_w, g, c.experts_per_token, m.stream);
        }
    } catch (...) {
        m.block_ring_first = -1;
        throw;
    }
    m.block_ring_first = -1;
    m.steps.layer = -1;
    // The last stage's hyper head (y, kept before the norm for the confidence head), its norm, the head.
    if (pending) hc_post(m.x, m.f, m.post, m.comb, g, D, s, hc);
    const HcWeights head_w{m.at<float>(m.dspark.hc_head_fn), m.at<float>(m.dspark.hc_head_base),
                           m.at<float>(m.dspark.hc_head_scale)};
    hc_head(m.x, g, head_w, m.hc_config(), m.hc_scratch, m.y, s);
    m.stream.copy(b + m.dspark.y, m.y, std::size_t(g) * D * 4);
    rms_norm(m.y, m.at<float>(m.dspark.norm), m.y, g, D, eps, s);
    m.dense_rows(m.at<void>(m.head.offset), m.head.type, V, D, m.y, D, g, m.logits, V);
    m.stream.copy(b + m.dspark.logits, m.logits, std::size_t(g) * V * 4);
    m.stream.synchronize();  // ids and pos are pageable sources
    if (routes_) m.report_dspark_routes(*routes_, ids, st.position);
    st.has_block = true;
}

std::vector<float> GpuModel::dspark_guess_logits(GpuDsparkState& st, std::size_t i, std::int32_t prev) {
    Impl& m = dspark_part(&st, "dspark_guess_logits");
    const ModelConfig& c = m.c;
    const int V = c.vocab_size;
    const Matrix& w1 = m.cpu.weights().dspark.markov_w1;
    if (!st.has_block || i >= std::size_t(c.dspark.block_size)) throw_internal("dspark_guess_logits: no such row of the block");
    if (prev < 0 || prev >= V) throw_internal("dspark_guess_logits: bad token");
    void* s = m.stream.handle();
    std::uint8_t* b = st.device.as<std::uint8_t>();
    float* x = reinterpret_cast<float*>(b + m.dspark.w1);
    float* corr = reinterpret_cast<float*>(b + m.dspark.correction);
    float* row = reinterpret_cast<float*>(b + m.dspark.row);
    // correction = markov_w2 · markov_w1[prev]; row = logits[i] + correction (hc_post with one
    // stream, post = comb = 1: 1·correction + 1·logits, the CPU's sum exactly).
    m.stream.copy(x, w1.row(prev), std::size_t(w1.cols) * 4);
    m.dense_rows(m.at<void>(m.dspark.markov_w2.offset), m.dspark.markov_w2.type, V, w1.cols, x, w1.cols, 1, corr, V);
    m.stream.copy(row, b + m.dspark.logits + i * std::size_t(V) * 4, std::size_t(V) * 4);
    const float* ones = m.at<float>(m.dspark.ones);
    hc_post(row, corr, ones, ones + 1, 1, V, s, 1);
    std::vector<float> out(static_cast<std::size_t>(V));
    m.stream.copy(out.data(), row, out.size() * 4);
    m.stream.synchronize();
    return out;
}

DsparkGreedy GpuModel::dspark_greedy(GpuDsparkState& st, std::int32_t anchor, std::size_t count) {
    return dspark_chain(st, anchor, count, nullptr, "dspark_greedy");
}

DsparkGreedy GpuModel::dspark_sampled(GpuDsparkState& st, std::int32_t anchor, std::size_t count, float temperature,
                                      std::span<const double> uniforms, bool q_to_host) {
    std::vector<float> q;
    const ChainDraws draws{temperature, uniforms, q_to_host ? &q : nullptr};
    return dspark_chain(st, anchor, count, &draws, "dspark_sampled");
}

DsparkGreedy GpuModel::dspark_chain(GpuDsparkState& st, std::int32_t anchor, std::size_t count,
                                    const ChainDraws* draws, const char* what) {
    Impl& m = dspark_part(&st, what);
    const ModelConfig& c = m.c;
    const int V = c.vocab_size, D = c.hidden_size, r = m.dspark.markov_w1.cols;
    if (!st.has_block || count < 1 || count > std::size_t(c.dspark.block_size))
        throw_internal(std::string(what) + ": no block, or guesses outside 1..γ");
    if (anchor < 0 || anchor >= V) throw_internal(std::string(what) + ": bad token");
    std::vector<float> u_host;
    float* u_dev = draws ? upload_draws(m, *draws, count, u_host, what) : nullptr;
    float* q_dev = draws ? u_dev + count : nullptr;
    void* s = m.stream.handle();
    std::uint8_t* b = st.device.as<std::uint8_t>();
    std::int32_t* ids = reinterpret_cast<std::int32_t*>(b + m.dspark.ids);
    float* in = reinterpret_cast<float*>(b + m.dspark.conf_in);
    float* x = in + D;  // markov_w1[prev]: the Markov GEMV's input and the confidence head's tail
    float* corr = reinterpret_cast<float*>(b + m.dspark.correction);
    float* row = reinterpret_cast<float*>(b + m.dspark.row);
    float* z = reinterpret_cast<float*>(b + m.dspark.z);
    const float* ones = m.at<float>(m.dspark.ones);
    const std::int32_t first = anchor;  // alive until the wait below (a pageable source)
    m.stream.copy(ids, &first, 4);
    for (std::size_t i = 0; i < count; ++i) {
        // markov_w1[ids[i]] gathered on the device (a copy: the host path's row exactly).
        gpu::embed(m.at<void>(m.dspark.markov_w1.offset), m.dspark.markov_w1.type, r, ids + i, 1, 1, x, s);
        // z_i = proj · [y_i | markov_w1[prev]] (the sigmoid on the host, Model's own).
        m.stream.copy(in, b + m.dspark.y + i * std::size_t(D) * 4, std::size_t(D) * 4);
        m.dense_rows(m.at<void>(m.dspark.confidence.offset), m.dspark.confidence.type, 1, D + r, in, D + r, 1, z + i, 1);
        // The Markov-corrected row as dspark_guess_logits's, then its argmax: the next prev.
        m.dense_rows(m.at<void>(m.dspark.markov_w2.offset), m.dspark.markov_w2.type, V, r, x, r, 1, corr, V);
        m.stream.copy(row, b + m.dspark.logits + i * std::size_t(V) * 4, std::size_t(V) * 4);
        hc_post(row, corr, ones, ones + 1, 1, V, s, 1);
        if (draws)
            sample_rows(row, 1, V, V, draws->temperature, u_dev + i, ids + i + 1, q_dev + i * std::size_t(V), s);
        else
            argmax_rows(row, 1, V, V, ids + i + 1, s);
    }
    DsparkGreedy out;
    out.ids.resize(count);
    std::vector<float> zs(count);
    m.stream.copy(out.ids.data(), ids + 1, count * 4);
    m.stream.copy(zs.data(), z, count * 4);
    if (draws) {
        m.last_chain_q = q_dev;
        m.last_chain_rows = count;
    }
    if (draws && draws->q) {
        out.q.resize(count * std::size_t(V));
        m.stream.copy(out.q.data(), q_dev, out.q.size() * 4);
    }
    m.stream.synchronize();
    out.confidences.resize(count);
    for (std::size_t i = 0; i < count; ++i) out.confidences[i] = ops::sigmoid(zs[i]);
    return out;
}

std::vector<float> GpuModel::dspark_y(const GpuDsparkState& st, std::size_t i) const {
    Impl& m = dspark_part(&st, "dspark_y");
    const std::size_t D = m.c.hidden_size;
    if (!st.has_block || i >= std::size_t(m.c.dspark.block_size)) throw_internal("dspark_y: no such row of the block");
    std::vector<float> y(D);
    m.stream.copy(y.data(), st.device.as<std::uint8_t>() + m.dspark.y + i * D * 4, D * 4);
    m.stream.synchronize();
    return y;
}

std::vector<float> GpuModel::dspark_ring(const GpuDsparkState& st, std::size_t stage) const {
    Impl& m = dspark_part(&st, "dspark_ring");
    if (stage >= m.dspark.rings.size()) throw_internal("dspark_ring: no such stage");
    std::vector<float> ring(std::size_t(m.c.sliding_window) * m.c.head_dim);
    m.stream.copy(ring.data(), st.device.as<std::uint8_t>() + m.dspark.rings[stage], ring.size() * 4);
    m.stream.synchronize();
    return ring;
}

}  // namespace aff::gpu
