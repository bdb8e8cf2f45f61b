// The attention-side steps of the CPU forward (see attention_ops.hpp). Moved out of
// Model::attention unchanged, loop for loop, so the tiny fixtures' logits stay bit-identical.
#include "libaff/model/attention_ops.hpp"

#include "libaff/model/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace aff {

namespace {
// One head of one query over its keys (§3.4): softmax of q·k / √Dh with the sink logit in the
// denominator, the weighted sum of the keys (each key is also the value). s: scratch.
void attend_keys(const float* qh, const std::vector<const float*>& keys, int Dh, float sink, std::vector<float>& s,
                 float* oh) {
    const float scale = 1.0f / std::sqrt(float(Dh));
    s.resize(keys.size());
    float m = sink;
    for (std::size_t j = 0; j < keys.size(); ++j) m = std::max(m, s[j] = ops::dot(qh, keys[j], Dh) * scale);
    float denom = std::exp(sink - m);
    for (std::size_t j = 0; j < keys.size(); ++j) denom += (s[j] = std::exp(s[j] - m));
    std::fill(oh, oh + Dh, 0.0f);
    for (std::size_t j = 0; j < keys.size(); ++j) {
        const float pj = s[j] / denom;
        for (int d = 0; d < Dh; ++d) oh[d] += pj * keys[j][d];
    }
}
}  // namespace

void attend(ThreadPool& pool, const AttendShape& sh, const float* q, const float* kv, const float* ring,
            const AttendEntries& en, const float* sink, float* o) {
    const int H = sh.heads, Dh = sh.head_dim, W = sh.window;
    const std::int64_t start = sh.start;
    pool.parallel_for(std::size_t(sh.n) * H, [&](std::size_t i0, std::size_t i1) {
        std::vector<const float*> keys;
        std::vector<float> s;
        for (std::size_t i = i0; i < i1; ++i) {
            const int t = int(i / H), h = int(i % H);
            const std::int64_t p = start + t;
            keys.clear();
            for (std::int64_t j = std::max<std::int64_t>(0, p - W + 1); j <= p; ++j)
                keys.push_back(j >= start ? &kv[std::size_t(j - start) * Dh] : &ring[std::size_t(j % W) * Dh]);
            if (en.entries) {
                if (en.index) {
                    for (int k = 0; k < en.index_count[t]; ++k)
                        keys.push_back(&en.entries[std::size_t(en.index[std::size_t(t) * en.stride + k]) * Dh]);
                } else {
                    const int visible = visible_entries(en.count, p, en.ratio);
                    for (int e = 0; e < visible; ++e) keys.push_back(&en.entries[std::size_t(e) * Dh]);
                }
            }
            attend_keys(&q[(std::size_t(t) * H + h) * Dh], keys, Dh, sink[h], s, &o[(std::size_t(t) * H + h) * Dh]);
        }
    });
}

void attend_block(ThreadPool& pool, const AttendShape& sh, const float* q, const float* kv, const float* ring,
                  std::int64_t ring_first, const float* sink, float* o) {
    const int H = sh.heads, Dh = sh.head_dim, W = sh.window;
    const std::int64_t first = std::max<std::int64_t>({0, ring_first, sh.start - W});
    pool.parallel_for(std::size_t(sh.n) * H, [&](std::size_t i0, std::size_t i1) {
        std::vector<const float*> keys;
        std::vector<float> s;
        for (std::size_t i = i0; i < i1; ++i) {
            const int t = int(i / H), h = int(i % H);
            keys.clear();
            for (std::int64_t j = first; j < sh.start; ++j) keys.push_back(&ring[std::size_t(j % W) * Dh]);
            for (int j = 0; j < sh.n; ++j) keys.push_back(&kv[std::size_t(j) * Dh]);
            attend_keys(&q[(std::size_t(t) * H + h) * Dh], keys, Dh, sink[h], s, &o[(std::size_t(t) * H + h) * Dh]);
        }
    });
}

void ring_store(float* ring, const float* kv, int n, int head_dim, int window, std::int64_t start) {
    for (int t = std::max(0, n - window); t < n; ++t)
        std::memcpy(&ring[std::size_t((start + t) % window) * head_dim], &kv[std::size_t(t) * head_dim],
                    sizeof(float) * head_dim);
}

void compress_tokens(const CompressorParams& w, CompressorState& st, std::int64_t start, int n, const float* kv,
                     const float* gate) {
    const int r = w.ratio, dim = w.dim, width = w.overlap ? 2 * dim : dim;
    const int rope_dim = 2 * static_cast<int>(w.inv_freq->size());
    std::vector<float> logits, values, entry(dim);
    for (int t = 0; t < n; ++t) {
        const std::int64_t p = start + t;
        const float* ape = w.ape + std::size_t(p % r) * width;
        float* pk = st.pending_kv.data() + std::size_t(st.pending) * width;
        float* pg = st.pending_gate.data() + std::size_t(st.pending) * width;
        for (int i = 0; i < width; ++i) {
            pk[i] = kv[std::size_t(t) * width + i];
            pg[i] = gate[std::size_t(t) * width + i] + ape[i];
        }
        if (++st.pending < r) continue;
        // Window complete: softmax over its slots per channel. CSA (overlap): the previous
        // window's first halves (Ca) + this window's second halves (Cb), 2r slots (§3.5).
        const int w_index = st.count;
        for (int d = 0; d < dim; ++d) {
            logits.clear();
            values.clear();
            if (w.overlap) {
                if (st.has_prev)
                    for (int i = 0; i < r; ++i) {
                        logits.push_back(st.prev_gate[std::size_t(i) * dim + d]);
                        values.push_back(st.prev_kv[std::size_t(i) * dim + d]);
                    }
                for (int i = 0; i < r; ++i) {
                    logits.push_back(st.pending_gate[std::size_t(i) * width + dim + d]);
                    values.push_back(st.pending_kv[std::size_t(i) * width + dim + d]);
                }
            } else {
                for (int i = 0; i < r; ++i) {
                    logits.push_back(st.pending_gate[std::size_t(i) * width + d]);
                    values.push_back(st.pending_kv[std::size_t(i) * width + d]);
                }
            }
            const float m = *std::max_element(logits.begin(), logits.end());
            float denom = 0, acc = 0;
            for (std::size_t i = 0; i < logits.size(); ++i) denom += std::exp(logits[i] - m);
            for (std::size_t i = 0; i < logits.size(); ++i) acc += std::exp(logits[i] - m) / denom * values[i];
            entry[d] = acc;
        }
        ops::rms_norm(entry.data(), dim, w.norm, w.eps, entry.data());
        ops::rope(entry.data() + dim - rope_dim, *w.inv_freq, std::int64_t(w_index) * r);
        st.entries.insert(st.entries.end(), entry.begin(), entry.end());
        ++st.count;
        if (w.overlap) {
            for (int i = 0; i < r; ++i)
                for (int d = 0; d < dim; ++d) {
                    st.prev_kv[std::size_t(i) * dim + d] = st.pending_kv[std::size_t(i) * width + d];
                    st.prev_gate[std::size_t(i) * dim + d] = st.pending_gate[std::size_t(i) * width + d];
                }
            st.has_prev = true;
        }
        st.pending = 0;
    }
}

void index_scores(ThreadPool& pool, int n, std::int64_t start, int Hi, int Di, int ratio, int count, const float* qi,
                  const float* wi, const float* keys, float* scores, int stride) {
    const float qk_scale = 1.0f / std::sqrt(float(Di)), head_scale = 1.0f / std::sqrt(float(Hi));
    pool.parallel_for(std::size_t(n), [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) {
            const int visible = visible_entries(count, start + std::int64_t(t), ratio);
            for (int e = 0; e < visible; ++e) {
                const float* key = &keys[std::size_t(e) * Di];
                float s = 0;
                for (int h = 0; h < Hi; ++h)
                    s += wi[t * Hi + h] * head_scale * (std::max(0.0f, ops::dot(&qi[(t * Hi + h) * Di], key, Di)) * qk_scale);
                scores[t * stride + e] = s;
            }
        }
    });
}

int select_topk(const float* scores, int visible, int k, std::int32_t* out) {
    std::vector<std::pair<float, int>> scored;
    scored.reserve(visible);
    for (int e = 0; e < visible; ++e) scored.emplace_back(scores[e], e);
    const std::size_t keep = std::min<std::size_t>(std::size_t(std::max(k, 0)), scored.size());
    std::partial_sort(scored.begin(), scored.begin() + keep, scored.end(), [](const auto& x, const auto& y) {
        return x.first > y.first || (x.first == y.first && x.second < y.second);
    });
    for (std::size_t i = 0; i < keep; ++i) out[i] = scored[i].second;
    return static_cast<int>(keep);
}

}  // namespace aff
