// The MTP layer on the GPU (forward.hpp: has_mtp .. mtp_ring; model doc §5.1, the CPU's
// Model::mtp_forward step by step): X0 = h_proj · hnorm(H) + e_proj · enorm(embed[next token])
// on every stream, one sliding-window layer run by the trunk's own layer code as layer
// num_layers (its ring in the MTP state's buffer), its own hyper head and norm, the shared
// head. H is the trunk's final streams, which never leave the device: keep_streams copies the
// last call's rows into the MTP state's store (slot = position mod W), or the MTP layer's
// own last output row for a chained guess. Only the logits come back to the host, and with a
// route observer the layer's routing (reported as layer num_layers: forward_routes.cpp).
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/argmax.hpp"
#include "kernels/sample_rows.hpp"
#include "kernels/embed.hpp"
#include "kernels/rms_norm.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::plan_mtp(const TensorReader* ck) {
    if (!mtp_experts_why_not.empty()) {
        mtp_why_not = mtp_experts_why_not;
        return;
    }
    const MtpWeights& w = cpu.weights().mtp.at(0);
    const int L = c.num_layers, W = c.sliding_window, hc = c.hc_mult;
    const std::size_t D = c.hidden_size;
    layers[L] = put_layer(w.layer, "mtp.0.", L, false, ck);
    mtp.e_proj = put_linear(w.e_proj, "mtp.0.e_proj.weight", ck);
    mtp.h_proj = put_linear(w.h_proj, "mtp.0.h_proj.weight", ck);
    mtp.enorm = put_vec(w.enorm);
    mtp.hnorm = put_vec(w.hnorm);
    mtp.norm = put_vec(w.norm);
    mtp.hc_head_fn = put_vec(w.hc_head.fn.w);
    mtp.hc_head_base = put_vec(w.hc_head.base);
    mtp.hc_head_scale = put_vec(w.hc_head.scale);
    // hc_post with post = 1 and comb = I gives x[t][k] + e[t] on every stream, exactly the
    // CPU's sum: 1·e + x[k] + 0·(the others). For the W rows a call takes at most.
    std::vector<float> identity(std::size_t(W) * hc * (1 + hc), 0.0f);
    for (int t = 0; t < W; ++t)
        for (int k = 0; k < hc; ++k) {
            identity[std::size_t(t) * hc + k] = 1.0f;  // post [W, hc]
            identity[std::size_t(W) * hc + (std::size_t(t) * hc + k) * hc + k] = 1.0f;  // comb [W, hc, hc]
        }
    mtp.identity = reserve(identity.size() * 4, plan.dense_bytes);
    uploads.push_back({mtp.identity, identity.size() * 4, [identity](std::uint8_t* dst) {
                           std::memcpy(dst, identity.data(), identity.size() * 4);
                       }});
    // The MTP state's buffer.
    std::size_t at = 0;
    auto take = [&](std::size_t floats) {
        const std::size_t offset = at;
        at += align_up(floats * 4);
        return offset;
    };
    mtp.ring = take(std::size_t(W) * c.head_dim);
    mtp.saved = take(std::size_t(W) * c.head_dim);
    mtp.store = take(std::size_t(W) * hc * D);
    mtp.out = take(std::size_t(hc) * D);
    mtp.ids = take(std::size_t(W));  // int32: a greedy chain's guesses (mtp_draft_greedy)
    mtp.bytes = at;
    has_mtp = true;  // plan_state, which runs after the weights, points state_refs[L] at mtp.ring
}

GpuModel::Impl& GpuModel::mtp_part(const GpuDecodeState* mtp, const char* what) const {
    Impl& m = *shards_.front();
    if (shards_.size() != 1 || !m.has_mtp)
        throw_unsupported(std::string(what) + ": the MTP layer is not on the GPU (" + mtp_why_not() + ")");
    if (mtp && mtp->mtp.size() < m.mtp.bytes) throw_internal(std::string(what) + ": not an MTP state of this model");
    use_device(m.device);
    return m;
}

bool GpuModel::has_mtp() const { return shards_.size() == 1 && shards_.front()->has_mtp; }

std::string GpuModel::mtp_why_not() const {
    if (has_mtp()) return {};
    return shards_.size() != 1 ? "the layers are split across GPUs" : shards_.front()->mtp_why_not;
}

GpuDecodeState GpuModel::new_mtp_state() const {
    Impl& m = mtp_part(nullptr, "new_mtp_state");
    GpuDecodeState st;
    st.mtp = Buffer(m.mtp.bytes);
    m.stream.fill(st.mtp.data(), 0, m.mtp.bytes);
    m.stream.synchronize();
    return st;
}

void GpuModel::keep_streams(GpuDecodeState& mst, std::int64_t position, int from_row, int rows) const {
    Impl& m = mtp_part(&mst, "keep_streams");
    const int W = m.c.sliding_window;
    if (rows < 0 || rows > W || from_row < 0 || position < 0 || from_row + rows > m.capacity)
        throw_usage("keep_streams: rows " + std::to_string(from_row) + ".." + std::to_string(from_row + rows) +
                    " of the last call (at most " + std::to_string(W) + " kept)");
    const std::size_t row = std::size_t(m.c.hc_mult) * m.c.hidden_size * 4;
    std::uint8_t* store = mst.mtp.as<std::uint8_t>() + m.mtp.store;
    const std::uint8_t* x = reinterpret_cast<const std::uint8_t*>(m.x) + std::size_t(from_row) * row;
    const int slot = int(position % W), first = std::min(rows, W - slot);
    m.stream.copy(store + std::size_t(slot) * row, x, std::size_t(first) * row);
    if (rows > first) m.stream.copy(store, x + std::size_t(first) * row, std::size_t(rows - first) * row);
}

namespace {
void check_tokens(std::span<const std::int32_t> next, int V) {
    for (std::int32_t t : next)
        if (t < 0 || t >= V)
            throw_usage("token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
}
}  // namespace

void GpuModel::Impl::mtp_step(GpuDecodeState& mst, int n, MtpInput from, bool all_logits, std::int32_t* pos) {
    const int hc = c.hc_mult, D = c.hidden_size, W = c.sliding_window, L = c.num_layers;
    void* s = stream.handle();
    const float eps = static_cast<float>(c.rms_norm_eps);
    ensure_scratch(n * hc);  // u holds the n·hc normalised streams
    prefill_call = false;    // GEMVs: fp32 activations, as the trunk's short calls
    steps.layer = -1;
    for (int t = 0; t < n; ++t) pos[t] = static_cast<std::int32_t>(mst.mtp_position + t);
    stream.copy(positions, pos, std::size_t(n) * 4);
    // e_proj · enorm(embed[next]) into `shared` [n, D]; the tokens are in tokens_dev.
    gpu::embed(at<void>(embed.offset), embed.type, D, tokens_dev, n, 1, f, s);
    rms_norm(f, at<float>(mtp.enorm), f, n, D, eps, s);
    apply(mtp.e_proj, f, D, n, shared, D);
    // hnorm of every stream of H into u [n·hc, D], then h_proj into x [n, hc, D].
    const std::size_t row = std::size_t(hc) * D;
    const float* base = mst.mtp.as<float>();
    if (from == MtpInput::own) {
        rms_norm(base + mtp.out / 4, at<float>(mtp.hnorm), u, hc, D, eps, s);
    } else {
        const int slot = int(mst.mtp_position % W), first = std::min(n, W - slot);
        const float* store = base + mtp.store / 4;
        rms_norm(store + std::size_t(slot) * row, at<float>(mtp.hnorm), u, first * hc, D, eps, s);
        if (n > first)
            rms_norm(store, at<float>(mtp.hnorm), u + std::size_t(first) * row, (n - first) * hc, D, eps, s);
    }
    apply(mtp.h_proj, u, D, n * hc, x, D);
    const float* identity = at<float>(mtp.identity);
    hc_post(x, shared, identity, identity + std::size_t(W) * hc, n, D, s, hc);
    // The layer, with the trunk's code, on the MTP state's ring; its hyper head and norm.
    const Seq seq{mst.mtp.as<std::uint8_t>(), mst.mtp_position, n, 0, nullptr};
    const bool pending = run_layer(L, std::span<const Seq>(&seq, 1), n, false, nullptr);
    steps.layer = -1;
    const int first = all_logits ? 0 : n - 1;
    run_head(n, first, pending, mtp.hc_head_fn, mtp.hc_head_base, mtp.hc_head_scale, mtp.norm);
    // run_head leaves x expanded: the last row is the next chained call's H.
    stream.copy(mst.mtp.as<std::uint8_t>() + mtp.out, x + std::size_t(n - 1) * row, row * 4);
}

std::vector<float> GpuModel::mtp_forward(GpuDecodeState& mst, std::span<const std::int32_t> next, MtpInput from,
                                         bool all_logits) {
    Impl& m = mtp_part(&mst, "mtp_forward");
    const ModelConfig& c = m.c;
    const int n = static_cast<int>(next.size()), V = c.vocab_size, W = c.sliding_window;
    if (n < 1 || n > W)
        throw_usage("mtp_forward: " + std::to_string(n) + " tokens (1.." + std::to_string(W) + ", the stored window)");
    if (from == MtpInput::own && n != 1) throw_usage("mtp_forward: a chained call runs one token");
    check_tokens(next, V);
    std::vector<std::int32_t> pos(n);
    // Before the tokens go up: growing the scratch moves tokens_dev (mtp_step's own call is
    // then a no-op; after the copy it dropped the tokens of a long catch-up).
    m.ensure_scratch(n * c.hc_mult);
    m.stream.copy(m.tokens_dev, next.data(), std::size_t(n) * 4);
    m.mtp_step(mst, n, from, all_logits, pos.data());
    const int first = all_logits ? 0 : n - 1;
    std::vector<float> out(std::size_t(n - first) * V);
    m.stream.copy(out.data(), m.logits, out.size() * 4);
    // Observed: the MTP layer's routing, still in the router's outputs (run_head routes
    // nothing), comes back with the logits and shares their wait. Never into the route ring
    // or the mover (move_experts runs in the trunk's finish_call only): the placement
    // accounting on the CPU side (trace replay, profile_from_trace) leaves the draft layer out
    // too, and its experts are placed whole by --draft-placement, not by the tier engine.
    if (routes_) m.mtp_routes.drain(m.route_ids, m.route_w, n, c.experts_per_token, m.stream);
    m.stream.synchronize();
    if (routes_) m.report_mtp_routes(*routes_, next, mst.mtp_position);  // before advancing, as the CPU's layer reports
    mst.mtp_position += n;
    return out;
}

std::vector<std::int32_t> GpuModel::mtp_draft_greedy(GpuDecodeState& mst, std::span<const std::int32_t> next,
                                                     std::size_t k) {
    return mtp_draft_chain(mst, next, k, nullptr, "mtp_draft_greedy");
}

std::vector<std::int32_t> GpuModel::mtp_draft_sampled(GpuDecodeState& mst, std::span<const std::int32_t> next,
                                                      std::size_t k, float temperature, std::span<const double> uniforms,
                                                      std::vector<float>* q) {
    ChainDraws draws{temperature, uniforms, q};
    return mtp_draft_chain(mst, next, k, &draws, "mtp_draft_sampled");
}

std::vector<float> GpuModel::last_chain_q(std::size_t rows) const {
    for (const auto& p : shards_)
        if (p->last_chain_q && p->last_chain_rows >= rows) {
            use_device(p->device);
            std::vector<float> q(rows * std::size_t(p->c.vocab_size));
            p->stream.copy(q.data(), p->last_chain_q, q.size() * 4);
            p->stream.synchronize();
            use_device(shards_.front()->device);
            return q;
        }
    throw_usage("last_chain_q: no sampled draft chain left " + std::to_string(rows) + " q rows");
}

float* GpuModel::upload_draws(Impl& m, const ChainDraws& draws, std::size_t rows, std::vector<float>& host,
                              const char* what) const {
    if (!(draws.temperature > 0.0f)) throw_usage(std::string(what) + ": temperature must be above 0");
    if (draws.uniforms.size() != rows)
        throw_usage(std::string(what) + ": " + std::to_string(draws.uniforms.size()) + " draws for " +
                    std::to_string(rows) + " guesses");
    host.clear();
    for (double u : draws.uniforms) {
        if (!(u >= 0.0 && u < 1.0)) throw_usage(std::string(what) + ": a draw outside [0, 1)");
        host.push_back(device_draw(u));
    }
    const std::size_t need = (rows + rows * std::size_t(m.c.vocab_size)) * 4;
    m.last_chain_q = nullptr;  // this chain's q rows replace the last one's
    m.last_chain_rows = 0;
    if (m.chain_draws.size() < need) m.chain_draws = Buffer(need);
    float* u = m.chain_draws.as<float>();
    m.stream.copy(u, host.data(), rows * 4);  // pageable: read by the chain's one wait
    return u;
}

std::vector<std::int32_t> GpuModel::mtp_draft_chain(GpuDecodeState& mst, std::span<const std::int32_t> next,
                                                    std::size_t k, const ChainDraws* draws, const char* what) {
    Impl& m = mtp_part(&mst, what);
    const ModelConfig& c = m.c;
    const int n = static_cast<int>(next.size()), V = c.vocab_size, W = c.sliding_window;
    if (n < 1 || n > W)
        throw_usage(std::string(what) + ": " + std::to_string(n) + " tokens (1.." + std::to_string(W) + ", the stored window)");
    if (k < 1 || k > std::size_t(W))
        throw_usage(std::string(what) + ": " + std::to_string(k) + " guesses (1.." + std::to_string(W) + ")");
    check_tokens(next, V);
    std::int32_t* ids = reinterpret_cast<std::int32_t*>(mst.mtp.as<std::uint8_t>() + m.mtp.ids);
    // A sampled chain's draws go up first, and its q rows [k, V] are written beside them.
    std::vector<float> u_host;
    float* u_dev = draws ? upload_draws(m, *draws, k, u_host, what) : nullptr;
    float* q_dev = draws ? u_dev + k : nullptr;
    // The guess straight into the token buffer the next step's embedding reads.
    auto pick = [&](std::size_t j) {
        if (draws)
            sample_rows(m.logits, 1, V, V, draws->temperature, u_dev + j, ids + j, q_dev + j * std::size_t(V),
                        m.stream.handle(), m.tokens_dev);
        else
            argmax_rows(m.logits, 1, V, V, ids + j, m.stream.handle(), m.tokens_dev);
    };
    // One positions array a step: the uploads are queued from pageable memory, read by the
    // time of the one wait at the end.
    std::vector<std::int32_t> pos(std::size_t(n) + k - 1);
    // Observed routing is reported with the tokens on the host, as mtp_forward's: then each
    // step waits for its guess (the route observer is a tracing run's, not the fast path).
    std::vector<std::int32_t> host_ids(k);
    auto drain = [&](std::span<const std::int32_t> tokens) {
        m.mtp_routes.drain(m.route_ids, m.route_w, int(tokens.size()), c.experts_per_token, m.stream);
        m.stream.synchronize();
        m.report_mtp_routes(*routes_, tokens, mst.mtp_position);
    };
    m.ensure_scratch(n * c.hc_mult);  // before the tokens go up (it may move tokens_dev)
    m.stream.copy(m.tokens_dev, next.data(), std::size_t(n) * 4);
    m.mtp_step(mst, n, MtpInput::trunk, false, pos.data());
    pick(0);
    if (routes_) drain(next);
    mst.mtp_position += n;
    const std::int64_t after = mst.mtp_position;
    if (k > 1) {
        // As MtpDrafter's chained path: the ring rows of the guesses are the trunk's to decide.
        mtp_save_ring(mst);
        for (std::size_t j = 1; j < k; ++j) {
            m.mtp_step(mst, 1, MtpInput::own, false, pos.data() + n + j - 1);
            pick(j);
            if (routes_) {
                m.stream.copy(host_ids.data() + j - 1, ids + j - 1, 4);  // this step's input token
                m.stream.synchronize();
                drain(std::span<const std::int32_t>(host_ids).subspan(j - 1, 1));
            }
            mst.mtp_position += 1;
        }
        mtp_restore_ring(mst, after);
    }
    m.stream.copy(host_ids.data(), ids, k * 4);
    if (draws) {
        m.last_chain_q = q_dev;
        m.last_chain_rows = k;
    }
    if (draws && draws->q) {
        draws->q->resize(k * std::size_t(V));
        m.stream.copy(draws->q->data(), q_dev, draws->q->size() * 4);
    }
    m.stream.synchronize();
    return host_ids;
}

void GpuModel::mtp_restart(GpuDecodeState& mst, std::int64_t position) const {
    Impl& m = mtp_part(&mst, "mtp_restart");
    m.stream.fill(mst.mtp.as<std::uint8_t>() + m.mtp.ring, 0, std::size_t(m.c.sliding_window) * m.c.head_dim * 4);
    mst.mtp_position = position;
}

void GpuModel::mtp_save_ring(GpuDecodeState& mst) const {
    Impl& m = mtp_part(&mst, "mtp_save_ring");
    std::uint8_t* b = mst.mtp.as<std::uint8_t>();
    m.stream.copy(b + m.mtp.saved, b + m.mtp.ring, std::size_t(m.c.sliding_window) * m.c.head_dim * 4);
}

void GpuModel::mtp_restore_ring(GpuDecodeState& mst, std::int64_t position) const {
    Impl& m = mtp_part(&mst, "mtp_restore_ring");
    std::uint8_t* b = mst.mtp.as<std::uint8_t>();
    m.stream.copy(b + m.mtp.ring, b + m.mtp.saved, std::size_t(m.c.sliding_window) * m.c.head_dim * 4);
    mst.mtp_position = position;
}

std::vector<float> GpuModel::mtp_ring(const GpuDecodeState& mst) const {
    Impl& m = mtp_part(&mst, "mtp_ring");
    std::vector<float> ring(std::size_t(m.c.sliding_window) * m.c.head_dim);
    m.stream.copy(ring.data(), mst.mtp.as<std::uint8_t>() + m.mtp.ring, ring.size() * 4);
    m.stream.synchronize();
    return ring;
}

}  // namespace aff::gpu
