// Random attention and compressor cases, built one way for aff-gpucheck (gpucheck.cpp) and the
// device tests (tests/gpu/attention_test.cpp, compressor_test.cpp): the CPU inputs drawn from
// the caller's generator in a fixed order (a seed gives the same case wherever it is built),
// their device copies, and the kernel's arguments over those copies. GPU builds only.
#pragma once

#include "libaff/gpu/device.hpp"
#include "libaff/model/attention_ops.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/model/forward.hpp"
#include "kernels/attention.hpp"
#include "kernels/compressor.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace aff::gpu {

// n draws of N(mean, sd) from rng.
template <class Rng>
std::vector<float> random_normal(Rng& rng, std::size_t n, float mean = 0.0f, float sd = 1.0f) {
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// For each of n tokens from `start`, distinct random indices into its visible entries, at
// most k, as the indexer's top-k would pick them: index [n, k] (−1 past index_count[t]).
template <class Rng>
void random_selection(Rng& rng, int n, std::int64_t start, int count, int ratio, int k,
                      std::vector<std::int32_t>& index, std::vector<std::int32_t>& index_count) {
    index.assign(std::size_t(n) * k, -1);
    index_count.assign(n, 0);
    std::vector<std::int32_t> all;
    for (int t = 0; t < n; ++t) {
        const int vis = visible_entries(count, start + t, ratio);
        all.resize(vis);
        std::iota(all.begin(), all.end(), 0);
        const int take = std::min(k, vis);
        for (int i = 0; i < take; ++i) {
            std::swap(all[i], all[std::uniform_int_distribution<int>(i, vis - 1)(rng)]);
            index[std::size_t(t) * k + i] = all[i];
        }
        index_count[t] = take;
    }
}

// One attention case on the host: queries and latents of shape.n tokens from shape.start, the
// ring of the window before them, `count` compressed entries (CSA and HCA), CSA's selection
// of at most topk entries a token, and the per-head sinks.
struct AttentionInputs {
    AttendShape shape;
    AttentionKind kind = AttentionKind::sliding;
    int count = 0, ratio = 0, topk = 0;
    std::vector<float> q, kv, ring, entries, sink;
    std::vector<std::int32_t> index, index_count;

    // The CPU twin's view of the entries and the selection (pointers into this object).
    AttendEntries attend_entries() const;
};

// Draws, in this order: q (standard deviation q_sd), kv, ring, entries ((start + n) / ratio
// rows for CSA and HCA, at least one row), the sinks when none are given, then the selection.
template <class Rng>
AttentionInputs random_attention_inputs(Rng& rng, const AttendShape& shape, AttentionKind kind, int ratio, int topk,
                                        float q_sd, std::vector<float> sink = {}) {
    AttentionInputs in;
    in.shape = shape;
    in.kind = kind;
    in.ratio = ratio;
    in.topk = topk;
    const std::size_t Dh = shape.head_dim;
    in.count = kind == AttentionKind::sliding ? 0 : int((shape.start + shape.n) / ratio);
    in.q = random_normal(rng, std::size_t(shape.n) * shape.heads * Dh, 0.0f, q_sd);
    in.kv = random_normal(rng, std::size_t(shape.n) * Dh);
    in.ring = random_normal(rng, std::size_t(shape.window) * Dh);
    in.entries = random_normal(rng, std::size_t(std::max(in.count, 1)) * Dh);
    in.sink = sink.empty() ? random_normal(rng, shape.heads) : std::move(sink);
    if (kind == AttentionKind::csa)
        random_selection(rng, shape.n, shape.start, in.count, ratio, topk, in.index, in.index_count);
    return in;
}

// An attention case's device copies and the kernel's arguments over them; `out` (and `scratch`
// for the split decode path) are the caller's to set.
struct AttentionDeviceCase {
    Buffer q, kv, ring, entries, sink, index, index_count;
    AttentionArgs args;
    explicit AttentionDeviceCase(const AttentionInputs& in);
};

// The compressor's state after `start` positions with random contents: the pending and
// previous windows drawn whole (rows past the counters are never read), then start / ratio
// entries; the counters are those `start` implies.
template <class Rng>
CompressorState random_compressor_state(Rng& rng, int ratio, int dim, bool overlap, std::int64_t start) {
    const std::size_t width = overlap ? 2 * dim : dim;
    CompressorState st;
    st.pending_kv = random_normal(rng, std::size_t(ratio) * width);
    st.pending_gate = random_normal(rng, std::size_t(ratio) * width);
    st.prev_kv = random_normal(rng, std::size_t(ratio) * dim);
    st.prev_gate = random_normal(rng, std::size_t(ratio) * dim);
    st.pending = int(start % ratio);
    st.count = int(start / ratio);
    st.has_prev = st.count > 0;
    st.entries = random_normal(rng, std::size_t(st.count) * dim);
    return st;
}

// A compressor's weights and state (after `start` positions) on the device, with rows for the
// entries of `tokens` more positions; args() gives the kernel's arguments for one step.
struct CompressorDeviceCase {
    int ratio = 0, dim = 0, rope_dim = 0;
    bool overlap = false;
    float eps = 0.0f;
    Buffer pending_kv, pending_gate, prev_kv, prev_gate, entries, ape, norm, inv_freq;

    // p's arrays are copied: they need not outlive the constructor.
    CompressorDeviceCase(const CompressorParams& p, const CompressorState& st, std::int64_t start, int tokens);
    // n tokens from `start`, their raw kv and gate projections [n, width] already on the device.
    CompressorArgs args(const float* kv, const float* gate, int n, std::int64_t start) const;
};

}  // namespace aff::gpu
