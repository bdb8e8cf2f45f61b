// GpuModel's rewind (forward.hpp: rewind_point, rewind, rewind_ranges): what a call changes
// that the state at its start still reads, copied device to device before the call and back
// after it. A call of n tokens from position P writes the ring slots (P .. P+n-1) mod W, its
// compressors' pending and previous windows, and entries from P / ratio on, which a state at
// P never reads (kernels/attention.hpp, kernels/compressor.hpp state contracts); so a point
// holds at most W ring rows and a few windows a layer, whatever the position.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

std::vector<StateRange> GpuModel::rewind_ranges(std::int64_t position, int tokens) const {
    const Impl& m = *shards_.front();
    const ModelConfig& c = m.c;
    if (!m.attention_on_gpu) return {};
    if (position < 0 || tokens < 0 || position + tokens > m.max_context)
        throw_usage("rewind: positions " + std::to_string(position) + ".." + std::to_string(position + tokens) +
                    " outside the GPU state's 0.." + std::to_string(m.max_context));
    const std::size_t W = c.sliding_window, row = std::size_t(c.head_dim) * 4;
    // The ring slots the call takes: n rows from P mod W on, wrapping (all of them from W tokens).
    const std::size_t rows = std::min<std::size_t>(tokens, W), first = std::size_t(position) % W;
    const std::size_t before_wrap = std::min(rows, W - first);
    StateRangeList list;
    for (const auto& owner : shards_) {
        list.part = owner->index;
        for (int l = owner->first_layer; l < owner->end_layer; ++l) {
            const AttentionRefs& a = owner->layers[l].attn;
            const LayerStateRefs& st = owner->state_refs[l];
            if (rows - before_wrap > 0) list.add(st.ring, (rows - before_wrap) * row);
            list.add(st.ring + first * row, before_wrap * row);
            if (a.has_compressor) add_compressor_windows(list, a.compressor, st.compressor);
            if (a.has_indexer) add_compressor_windows(list, a.indexer, st.indexer);
        }
    }
    return list.ranges;
}

GpuRewindPoint GpuModel::rewind_point(const GpuDecodeState& st, int tokens) const {
    GpuRewindPoint p;
    rewind_point(st, tokens, p);
    return p;
}

void GpuModel::rewind_point(const GpuDecodeState& st, int tokens, GpuRewindPoint& p) const {
    const Impl& m = *shards_.front();
    for (const auto& part : shards_)
        if (m.attention_on_gpu ? !part->holds(st) : st.attention.layers.size() != std::size_t(m.c.num_layers))
            throw_internal("rewind_point: decode state belongs to another model");
    p.position = st.position;
    p.end = st.position + tokens;
    p.model = this;
    if (!m.attention_on_gpu) {
        p.attention = st.attention;
        return;
    }
    p.ranges = rewind_ranges(st.position, tokens);
    std::vector<std::size_t> bytes(shards_.size(), 0);
    for (const StateRange& r : p.ranges) bytes[r.part] += r.bytes;
    p.copies.resize(shards_.size());
    std::vector<std::size_t> at(shards_.size(), 0);
    for (std::size_t i = 0; i < shards_.size(); ++i) {
        use_device(shards_[i]->device);
        if (p.copies[i].size() < bytes[i]) p.copies[i] = Buffer(bytes[i]);
    }
    // On each part's stream, so they run before the call's launches and no host waits.
    for (const StateRange& r : p.ranges) {
        const Impl& part = *shards_[r.part];
        use_device(part.device);
        part.stream.copy(p.copies[r.part].as<std::uint8_t>() + at[r.part],
                         part.state_of(st)->as<std::uint8_t>() + r.offset, r.bytes);
        at[r.part] += r.bytes;
    }
    use_device(m.device);
}

void GpuModel::rewind(GpuDecodeState& st, const GpuRewindPoint& p) const {
    const Impl& m = *shards_.front();
    if (p.model != this) throw_usage("rewind: the rewind point was taken by another GPU model");
    if (st.position != p.end)
        throw_usage("rewind: the sequence is at position " + std::to_string(st.position) + ", the rewind point's call "
                    "ended at " + std::to_string(p.end) + " (rewind through later points first)");
    if (!m.attention_on_gpu) {
        st.attention = p.attention;
        st.position = p.position;
        return;
    }
    for (const auto& part : shards_)
        if (!part->holds(st)) throw_internal("rewind: decode state belongs to another model");
    std::vector<std::size_t> at(shards_.size(), 0);
    for (const StateRange& r : p.ranges) {
        const Impl& part = *shards_[r.part];
        use_device(part.device);
        part.stream.copy(part.state_of(st)->as<std::uint8_t>() + r.offset,
                         p.copies[r.part].as<std::uint8_t>() + at[r.part], r.bytes);
        at[r.part] += r.bytes;
    }
    use_device(m.device);
    st.position = p.position;
}

}  // namespace aff::gpu
