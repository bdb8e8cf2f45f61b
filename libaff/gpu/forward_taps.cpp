// DSpark's tap features on the GPU (forward.hpp: set_taps, last_taps; model doc §5.2): the
// plain mean of the hc streams of the residual after each of config.dspark.tap_layers, what
// the CPU reference's forward puts in DecodeState::taps. The stream rows after a tap layer
// are copied device to device into taps_dev; a decode-sized call still has that layer's last
// expand pending in f, post and comb (run_layer), so the copy gets the expand and x does not:
// the trunk's own arithmetic is untouched, its logits the same bit for bit with taps on or
// off. The copies come to the host with the logits and are averaged there: a few rows a
// decode step, and a prompt's worth at prefill, cheaper to move than a kernel is to maintain.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <algorithm>

namespace aff::gpu {

void GpuModel::Impl::ensure_taps(int rows) {
    if (!taps_on || rows <= taps_rows) return;
    const std::size_t taps = c.dspark.tap_layers.size(), row = std::size_t(c.hc_mult) * c.hidden_size;
    taps_rows = std::max(rows, capacity);
    taps_dev = Buffer(std::max<std::size_t>(1, taps * std::size_t(taps_rows) * row * 4));
    graphs.clear();  // they copy into the old buffer
}

void GpuModel::Impl::tap_after(int l, int n, bool pending) {
    const std::vector<int>& taps = c.dspark.tap_layers;
    const auto it = std::find(taps.begin(), taps.end(), l);
    if (it == taps.end()) return;
    const int hc = c.hc_mult, D = c.hidden_size;
    const std::size_t row = std::size_t(hc) * D;
    float* dst = taps_dev.as<float>() + std::size_t(it - taps.begin()) * std::size_t(taps_rows) * row;
    stream.copy(dst, x, std::size_t(n) * row * 4);
    if (pending) hc_post(dst, f, post, comb, n, D, stream.handle(), hc);
}

void GpuModel::set_taps(bool on) {
    Impl& m = *shards_.front();
    if (on && shards_.size() != 1) throw_unsupported("DSpark taps: the layers are split across GPUs");
    if (on && m.c.dspark.tap_layers.empty()) throw_unsupported("DSpark taps: the model names no tap layers");
    if (m.taps_on == on) return;
    // taps_dev stays allocated when off (graphs captured with the tap copies write into it, and
    // a drafter that turns its listening off and on again, DraftGate's plain runs, finds them
    // still valid): the decode graphs' key says whether taps were on (forward_decode.cpp), so
    // switching recaptures nothing once both kinds exist.
    m.taps_on = on;
    taps_.clear();
}

bool GpuModel::taps_on() const { return shards_.front()->taps_on; }

DraftPlacement GpuModel::draft_placement() const { return shards_.front()->options.draft_placement; }

float* GpuModel::tap_streams_host(int n) {
    const Impl& m = *shards_.front();
    const std::size_t taps = m.c.dspark.tap_layers.size(), row = std::size_t(m.c.hc_mult) * m.c.hidden_size;
    if (n > kPinnedTapRows) {
        tap_pageable_.resize(taps * std::size_t(n) * row);
        return tap_pageable_.data();
    }
    if (tap_pinned_.size() == 0) tap_pinned_ = PinnedBuffer(taps * std::size_t(kPinnedTapRows) * row * 4);
    return static_cast<float*>(tap_pinned_.data());
}

void GpuModel::queue_taps(int n) {
    Impl& m = *shards_.front();
    const std::size_t taps = m.c.dspark.tap_layers.size(), row = std::size_t(m.c.hc_mult) * m.c.hidden_size;
    float* host = tap_streams_host(n);
    for (std::size_t k = 0; k < taps; ++k)
        m.stream.copy(host + k * n * row, m.taps_dev.as<float>() + k * std::size_t(m.taps_rows) * row,
                      std::size_t(n) * row * 4);
}

void GpuModel::average_taps(int n) {
    const Impl& m = *shards_.front();
    const std::size_t taps = m.c.dspark.tap_layers.size();
    const int hc = m.c.hc_mult, D = m.c.hidden_size;
    const std::size_t row = std::size_t(hc) * D;
    taps_.assign(std::size_t(n) * taps * D, 0.0f);
    const float* streams = tap_streams_host(n);  // queue_taps's copies, the stream done
    // The CPU reference's stream_mean, term for term.
    const float inv = 1.0f / float(hc);
    for (std::size_t k = 0; k < taps; ++k)
        for (int t = 0; t < n; ++t) {
            const float* xt = streams + (k * n + std::size_t(t)) * row;
            float* o = taps_.data() + (std::size_t(t) * taps + k) * D;
            for (int d = 0; d < D; ++d) {
                float sum = 0;
                for (int j = 0; j < hc; ++j) sum += xt[std::size_t(j) * D + d];
                o[d] = sum * inv;
            }
        }
}

}  // namespace aff::gpu
