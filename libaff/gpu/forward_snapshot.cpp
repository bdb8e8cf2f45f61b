// GpuModel's prefix snapshots (forward.hpp): which bytes of a sequence's device state matter
// at a position, and their copy to and from host memory. A state buffer is sized for
// max_context tokens (plan_state), but at position p the kernels read only the ring slots of
// the last min(p, W) tokens, the compressors' pending and previous windows and the p / ratio
// entries emitted so far (kernels/attention.hpp, kernels/compressor.hpp state contracts), so
// a snapshot of a short prompt costs a small part of the buffer.
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <algorithm>

namespace aff::gpu {

using namespace fwd;

std::vector<StateRange> GpuModel::snapshot_ranges(std::int64_t position) const {
    const Impl& m = *shards_.front();
    const ModelConfig& c = m.c;
    if (!m.attention_on_gpu) return {};
    if (position < 0 || position > m.max_context)
        throw_usage("snapshot: position " + std::to_string(position) + " outside the GPU state's 0.." +
                    std::to_string(m.max_context));
    const std::size_t p = static_cast<std::size_t>(position);
    // Regions are laid out in this order (plan_state), each at an aligned offset; a split
    // model's parts each have their own buffer.
    StateRangeList list;
    auto add = [&](std::size_t offset, std::size_t bytes) { list.add(offset, bytes); };
    auto comp = [&](const CompressorRefs& w, const CompressorStateRefs& st) {
        add_compressor_windows(list, w, st);
        add(st.entries, std::min<std::size_t>(p / w.ratio, st.capacity) * w.dim * 4);
    };
    for (const auto& owner : shards_) {
        list.part = owner->index;
        for (int l = owner->first_layer; l < owner->end_layer; ++l) {
            const AttentionRefs& a = owner->layers[l].attn;
            const LayerStateRefs& st = owner->state_refs[l];
            add(st.ring, std::min<std::size_t>(p, c.sliding_window) * c.head_dim * 4);
            if (a.has_compressor) comp(a.compressor, st.compressor);
            if (a.has_indexer) comp(a.indexer, st.indexer);
        }
    }
    return list.ranges;
}

void GpuModel::copy_state(const GpuDecodeState& st, const std::vector<StateRange>& ranges, std::uint8_t* to_host,
                          const std::uint8_t* from_host, const char* what) const {
    for (const auto& part : shards_)
        if (!part->holds(st)) throw_internal(std::string(what) + ": decode state belongs to another model");
    std::size_t at = 0;
    for (const StateRange& r : ranges) {
        const Impl& part = *shards_[r.part];
        use_device(part.device);
        std::uint8_t* dev = part.state_of(st)->as<std::uint8_t>() + r.offset;
        if (to_host) part.stream.copy(to_host + at, dev, r.bytes);
        else part.stream.copy(dev, from_host + at, r.bytes);
        at += r.bytes;
    }
    for (const auto& part : shards_) {
        use_device(part->device);
        part->stream.synchronize();
    }
    use_device(shards_.front()->device);
}

namespace {
std::size_t total_bytes(const std::vector<StateRange>& ranges) {
    std::size_t total = 0;
    for (const StateRange& r : ranges) total += r.bytes;
    return total;
}
}  // namespace

GpuStateSnapshot GpuModel::snapshot(const GpuDecodeState& st) const {
    const Impl& m = *shards_.front();
    GpuStateSnapshot s;
    s.position = st.position;
    s.model = this;
    if (!m.attention_on_gpu) {
        s.attention = st.attention;
        return s;
    }
    const std::vector<StateRange> ranges = snapshot_ranges(st.position);
    s.device.resize(total_bytes(ranges));
    copy_state(st, ranges, s.device.data(), nullptr, "snapshot");
    return s;
}

void GpuModel::restore(GpuDecodeState& st, const GpuStateSnapshot& s) const {
    const Impl& m = *shards_.front();
    if (s.model != this) throw_usage("restore: the snapshot was taken by another GPU model");
    if (!m.attention_on_gpu) {
        st.attention = s.attention;
        st.position = s.position;
        return;
    }
    const std::vector<StateRange> ranges = snapshot_ranges(s.position);
    const std::size_t total = total_bytes(ranges);
    if (total != s.device.size())
        throw_internal("restore: the snapshot holds " + std::to_string(s.device.size()) + " bytes, position " +
                       std::to_string(s.position) + " needs " + std::to_string(total));
    copy_state(st, ranges, nullptr, s.device.data(), "restore");
    st.position = s.position;
}

}  // namespace aff::gpu
