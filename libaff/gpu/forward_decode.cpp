// The calls of GpuModel (forward_impl.hpp): forward (a prompt or chunk) and forward_ids (its
// greedy picks on the device), decode (one token for each of 1..4 sequences, replayed from
// captured graphs), the per-op-class step profile and the bytes a decode step must read.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "kernels/argmax.hpp"
#include "kernels/speculative_rows.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::check_call(const GpuDecodeState& st, std::span<const std::int32_t> toks) const {
    const int n = static_cast<int>(toks.size()), V = c.vocab_size;
    for (std::int32_t t : toks)
        if (t < 0 || t >= V)
            throw_usage("token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) +
                        ")");
    if (attention_on_gpu ? !holds(st) : st.attention.layers.size() != std::size_t(c.num_layers))
        throw_internal("forward: decode state belongs to another model");
    if (attention_on_gpu && st.position + n > max_context)
        throw_usage("the sequence would reach " + std::to_string(st.position + n) + " tokens, over the GPU state's " +
                    std::to_string(max_context));
}

void GpuModel::Impl::start_part(Impl* previous, std::span<const std::int32_t> toks,
                                std::span<const std::int32_t> pos, bool pending) {
    use_device(device);
    if (tiers) tiers->wait_for_moves(stream);  // before any launch of the call (and any graph capture)
    const int n = static_cast<int>(toks.size());
    ensure_scratch(n);
    stream.copy(tokens_dev, toks.data(), std::size_t(n) * 4);
    if (attention_on_gpu) stream.copy(positions, pos.data(), std::size_t(n) * 4);
    if (previous) previous->hand_over(*this, n, pending);
    read_ahead_ssd(toks);  // tiered with experts on the SSD: the hash layers' reads start now
}

std::vector<float> GpuModel::forward(GpuDecodeState& st, std::span<const std::int32_t> toks, bool all_logits) {
    return forward_call(st, toks, all_logits, {});
}

std::vector<std::int32_t> GpuModel::forward_ids(GpuDecodeState& st, std::span<const std::int32_t> toks, bool all_rows,
                                                std::size_t candidates, const RowDraws* draws) {
    const std::size_t V = std::size_t(shards_.front()->c.vocab_size);
    if (candidates == 0 || candidates > V)
        throw_usage("forward_ids: " + std::to_string(candidates) + " candidates outside 1.." + std::to_string(V));
    if (draws) {
        const std::size_t rows = all_rows ? toks.size() : 1;
        if (!(draws->temperature > 0.0f)) throw_usage("forward_ids: a draw's temperature must be above 0");
        if (draws->uniforms.size() != 2 * rows)
            throw_usage("forward_ids: " + std::to_string(draws->uniforms.size()) + " draws for " + std::to_string(rows) +
                        " rows (two a row)");
        for (double u : draws->uniforms)
            if (!(u >= 0.0 && u < 1.0)) throw_usage("forward_ids: a draw outside [0, 1)");
        if (draws->guesses > 0 && (!all_rows || draws->guesses >= toks.size()))
            throw_usage("forward_ids: guesses to verify need every row and a token after each");
        if (draws->guesses > 0 && !draws->q_from_last_chain && draws->q.size() != draws->guesses * V)
            throw_usage("forward_ids: draft rows that do not cover the guesses");
        if (draws->q_from_last_chain && draws->guesses > 0) {
            const Impl& last = *shards_.back();
            if (!last.last_chain_q || last.last_chain_rows < draws->guesses)
                throw_usage("forward_ids: no sampled draft chain left q rows for " + std::to_string(draws->guesses) +
                            " guesses on the device");
        }
    }
    std::vector<std::int32_t> ids;
    forward_call(st, toks, all_rows, {&ids, int(candidates), draws});
    return ids;
}

std::vector<float> GpuModel::forward_call(GpuDecodeState& st, std::span<const std::int32_t> toks, bool all_logits,
                                          CallOutput out) {
    const Impl& m0 = *shards_.front();
    const int n = static_cast<int>(toks.size());
    if (n == 0) throw_usage("forward: no tokens");
    if (n == 1 && m0.attention_on_gpu) {  // a decode step: the captured path
        GpuDecodeState* one[1] = {&st};
        return decode_call(one, toks, out);
    }
    for (const auto& p : shards_) p->check_call(st, toks);

    const std::int64_t start = st.position;
    std::vector<std::int32_t> pos(n);
    for (int t = 0; t < n; ++t) pos[t] = static_cast<std::int32_t>(st.position + t);
    const int first = all_logits ? 0 : n - 1;
    shards_.front()->ensure_taps(n);
    bool pending = false;
    for (std::size_t i = 0; i < shards_.size(); ++i) {  // each part in turn, on its own device
        Impl& m = *shards_[i];
        m.start_part(i > 0 ? shards_[i - 1].get() : nullptr, toks, pos, pending);
        const Seq seq{m.attention_on_gpu ? m.state_of(st)->as<std::uint8_t>() : nullptr, st.position, n, 0, nullptr};
        pending = m.run(std::span<const Seq>(&seq, 1), n, first, &st, pending);
    }
    st.position += n;
    if (!m0.attention_on_gpu) st.attention.position = st.position;
    return finish_call(std::size_t(n - first), toks, std::span<const std::int64_t>(&start, 1), out);
}

std::vector<float> GpuModel::finish_call(std::size_t rows, std::span<const std::int32_t> toks,
                                         std::span<const std::int64_t> starts, CallOutput want) {
    const Impl& m0 = *shards_.front();
    const int n = static_cast<int>(toks.size());
    Impl& last = *shards_.back();
    const int V = m0.c.vocab_size;
    std::vector<float> out;
    use_device(last.device);
    std::vector<float> draws_host;  // a drawn pick's uniforms, alive until the wait below
    if (want.ids) {
        // The picks where the logits are (the head's rows, packed from the call's first kept row).
        want.ids->resize(rows);
        if (want.draws)
            last.draw_picks(*want.draws, int(rows), want.candidates, draws_host);
        else
            argmax_rows(last.logits, int(rows), want.candidates, V, last.logit_ids, last.stream.handle());
        last.stream.copy(want.ids->data(), last.logit_ids, rows * 4);
    } else {
        out.resize(rows * std::size_t(V));
        last.stream.copy(out.data(), last.logits, out.size() * 4);
    }
    if (m0.taps_on) queue_taps(n);  // one GPU: the same stream, waited for with the logits
    for (const auto& p : shards_)  // after the logits: one copy each, waited for with them
        if (routes_ || p->tiers) {
            use_device(p->device);
            p->drain_routes(n);
        }
    for (const auto& p : shards_)
        if (p.get() == &last || routes_ || p->tiers) {
            use_device(p->device);
            p->stream.synchronize();
        }
    if (m0.taps_on) average_taps(n);
    if (shards_.size() == 1) shards_.front()->move_experts(n);  // tiered experts only; every launch is done
    use_device(m0.device);
    if (routes_) report_routes(toks, starts);
    return out;
}

void GpuModel::Impl::draw_picks(const RowDraws& d, int rows, int candidates, std::vector<float>& host) {
    const int V = c.vocab_size;
    // The uniforms as floats, then any host q rows.
    host.clear();
    for (double u : d.uniforms) host.push_back(device_draw(u));
    const std::size_t q_floats = d.q_from_last_chain ? 0 : d.q.size();
    const std::size_t need = (host.size() + q_floats) * 4;
    if (pick_draws.size() < need) pick_draws = Buffer(need);
    float* u = pick_draws.as<float>();
    stream.copy(u, host.data(), host.size() * 4);  // pageable: read by the call's one wait
    const float* q = d.q_from_last_chain ? last_chain_q : u + host.size();
    if (q_floats) stream.copy(u + host.size(), d.q.data(), q_floats * 4);
    // Row j's guess is the call's token j + 1: already on the device in tokens_dev.
    speculative_rows(logits, rows, candidates, V, d.temperature, u, tokens_dev + 1, int(d.guesses), q, V, logit_ids,
                     stream.handle());
}

void GpuModel::set_max_layers(int layers) {
    for (const auto& p : shards_) {
        p->options.forward.max_layers = layers;
        p->graphs.clear();  // captured with the old layer count
    }
}

void GpuModel::set_gemv_calls(bool on) {
    for (const auto& p : shards_) p->gemv_calls = on;
}

GpuStepProfile GpuModel::profile_decode(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> toks) {
    GpuStepProfile p;
    const bool graphs = shards_.front()->options.graphs;
    auto set = [&](bool profiling) {
        for (const auto& m : shards_) {
            m->options.graphs = profiling ? false : graphs;
            m->steps.profiling = profiling;
            if (profiling) m->steps.marks.clear();
        }
    };
    set(true);
    try {
        p.logits = decode(states, toks);
    } catch (...) {
        set(false);
        throw;
    }
    set(false);
    const Impl& m0 = *shards_.front();
    p.layer_ms.assign(std::max(layers_run(m0.options.forward, m0.c), 0), 0.0);
    for (const auto& m : shards_) {  // each part's marks are on its own device's stream
        const std::vector<StepMarks::Mark>& marks = m->steps.marks;
        for (std::size_t i = 0; i + 1 < marks.size(); ++i) {
            const StepMarks::Mark& k = marks[i];
            const double ms = marks[i + 1].event->ms_since(*k.event);
            auto it = std::find_if(p.classes.begin(), p.classes.end(), [&](const auto& e) { return e.first == k.what; });
            if (it == p.classes.end()) p.classes.emplace_back(k.what, ms);
            else it->second += ms;
            if (k.layer >= 0) p.layer_ms[k.layer] += ms;
            p.total_ms += ms;
        }
        m->steps.marks.clear();
    }
    return p;
}

std::size_t GpuModel::decode_read_bytes(int sequences) const {
    const Impl& m = *shards_.front();
    const ModelConfig& c = m.c;
    const int layers = layers_run(m.options.forward, c);
    const std::size_t elem = [](DenseType t) { return t == DenseType::bf16 ? 2u : 4u; }(shards_.back()->head.type);
    std::size_t bytes = std::size_t(c.vocab_size) * c.hidden_size * elem;  // the head
    bytes += std::size_t(sequences) * c.hidden_size * (m.embed.type == DenseType::bf16 ? 2 : 4);  // embedding rows
    const std::size_t routed =
        m.experts_codebook ? 2 * m.w13_bytes + m.w2_bytes
                           : 3 * std::size_t(c.hidden_size) * c.moe_intermediate_size * (m.expert_type == DenseType::bf16 ? 2 : 4);
    const std::size_t chosen = std::min<std::size_t>(std::size_t(sequences) * c.experts_per_token, c.n_routed_experts);
    for (const auto& p : shards_)
        for (int l = p->first_layer; l < std::min(layers, p->end_layer); ++l) bytes += p->layer_dense_bytes[l] + chosen * routed;
    return bytes;
}

std::size_t GpuModel::decode_state_read_bytes(std::int64_t position) const {
    const Impl& m = *shards_.front();
    const ModelConfig& c = m.c;
    if (!m.attention_on_gpu) return 0;
    const int layers = layers_run(m.options.forward, c);
    const std::size_t p = static_cast<std::size_t>(position) + 1;  // keys of the query at `position`
    std::size_t bytes = 0;
    for (int l = 0; l < layers; ++l) {
        const Impl& owner = **std::find_if(shards_.begin(), shards_.end(), [&](const auto& p) { return l < p->end_layer; });
        const AttentionRefs& r = owner.layers[l].attn;
        bytes += std::min<std::size_t>(p, c.sliding_window) * c.head_dim * 4;  // the window (ring)
        if (r.has_indexer) {  // every indexer key is scored, the top-k main entries attended
            const std::size_t entries = p / r.indexer.ratio;
            bytes += entries * c.index_head_dim * 4 + std::min<std::size_t>(entries, c.index_topk) * c.head_dim * 4;
        } else if (r.has_compressor) {
            bytes += p / r.compressor.ratio * c.head_dim * 4;
        }
    }
    return bytes;
}

std::vector<float> GpuModel::decode(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> toks) {
    return decode_call(states, toks, {});
}

std::vector<float> GpuModel::decode_call(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> toks,
                                         CallOutput want) {
    Impl& m0 = *shards_.front();
    const int B = static_cast<int>(states.size());
    if (B < 1 || B > kDecodeBatchMax)
        throw_usage("decode: " + std::to_string(B) + " sequences (1.." + std::to_string(kDecodeBatchMax) + " a call)");
    if (toks.size() != states.size())
        throw_usage("decode: " + std::to_string(toks.size()) + " tokens for " + std::to_string(B) + " sequences");
    for (int i = 0; i < B; ++i) {
        for (int j = 0; j < i; ++j)
            if (states[j] == states[i]) throw_usage("decode: the same sequence twice in one call");
        for (const auto& p : shards_) p->check_call(*states[i], toks.subspan(i, 1));
    }
    if (!m0.attention_on_gpu) {  // attention on the CPU: one sequence at a time
        std::vector<float> out;
        std::vector<std::int32_t> one_id;
        if (want.ids) want.ids->clear();
        for (int i = 0; i < B; ++i) {
            const std::vector<float> one =
                forward_call(*states[i], toks.subspan(i, 1), false, {want.ids ? &one_id : nullptr, want.candidates});
            out.insert(out.end(), one.begin(), one.end());
            if (want.ids) want.ids->insert(want.ids->end(), one_id.begin(), one_id.end());
        }
        return out;
    }
    // Everything that changes between steps goes to the device before the launches: the
    // tokens, and each sequence's position (which the kernels read through Seq::start_at).
    // Each part of a split model gets its own copy, runs its own captured graph, and hands
    // the residual stream to the next.
    std::vector<std::int32_t> pos(B);
    std::vector<std::int64_t> starts(B);  // for the route events: each sequence's own call
    for (int i = 0; i < B; ++i) {
        pos[i] = static_cast<std::int32_t>(states[i]->position);
        starts[i] = states[i]->position;
    }
    m0.ensure_taps(B);
    bool pending = false;
    for (std::size_t part = 0; part < shards_.size(); ++part) {
        Impl& m = *shards_[part];
        m.start_part(part > 0 ? shards_[part - 1].get() : nullptr, toks, pos, pending);
        std::vector<Seq> seqs(B);
        for (int i = 0; i < B; ++i) seqs[i] = {m.state_of(*states[i])->as<std::uint8_t>(), 0, 1, i, m.positions + i};
        const bool pending_in = pending;
        auto record = [&] { return m.run(seqs, B, 0, nullptr, pending_in); };
        if (m.options.graphs) {
            std::vector<const void*> key(B);
            for (int i = 0; i < B; ++i) key[i] = m.state_of(*states[i])->data();
            key.push_back(m.taps_on ? m.taps_dev.data() : nullptr);  // captured with the tap copies or without
            pending = m.graphs.launch(key, m.stream, record);
        } else {
            pending = record();
        }
    }
    for (int i = 0; i < B; ++i) ++states[i]->position;
    return finish_call(std::size_t(B), toks, starts, want);
}

}  // namespace aff::gpu
