// The device halves of the attention and compressor cases (kernel_cases.hpp): uploads and the
// kernels' argument structs, so gpucheck and the device tests fill them one way.
#include "libaff/gpu/kernel_cases.hpp"

#include "libaff/gpu/host_copy.hpp"

namespace aff::gpu {

AttendEntries AttentionInputs::attend_entries() const {
    AttendEntries en;
    if (kind != AttentionKind::sliding) en = {entries.data(), count, ratio};
    if (kind == AttentionKind::csa) {
        en.index = index.data();
        en.index_count = index_count.data();
        en.stride = topk;
    }
    return en;
}

AttentionDeviceCase::AttentionDeviceCase(const AttentionInputs& in)
    : q(to_device(in.q)), kv(to_device(in.kv)), ring(to_device(in.ring)),
      entries(to_device(in.entries)), sink(to_device(in.sink)) {
    args.q = q.as<float>();
    args.kv = kv.as<float>();
    args.ring = ring.as<float>();
    args.sink = sink.as<float>();
    args.n = in.shape.n;
    args.heads = in.shape.heads;
    args.head_dim = in.shape.head_dim;
    args.window = in.shape.window;
    args.start = in.shape.start;
    if (in.kind != AttentionKind::sliding) {
        args.entries = entries.as<float>();
        args.entry_count = in.count;
        args.ratio = in.ratio;
    }
    if (in.kind == AttentionKind::csa) {
        index = to_device(in.index);
        index_count = to_device(in.index_count);
        args.selected = index.as<std::int32_t>();
        args.selected_count = index_count.as<std::int32_t>();
        args.selected_stride = in.topk;
    }
}

CompressorDeviceCase::CompressorDeviceCase(const CompressorParams& p, const CompressorState& st, std::int64_t start,
                                           int tokens)
    : ratio(p.ratio), dim(p.dim), rope_dim(int(p.inv_freq->size()) * 2), overlap(p.overlap), eps(float(p.eps)),
      pending_kv(to_device(st.pending_kv)), pending_gate(to_device(st.pending_gate)),
      prev_kv(to_device(st.prev_kv)), prev_gate(to_device(st.prev_gate)) {
    const int width = p.overlap ? 2 * p.dim : p.dim;
    const int capacity = int((start + tokens) / p.ratio) + 1;
    std::vector<float> rows = st.entries;
    rows.resize(std::size_t(capacity) * p.dim, 0.0f);
    entries = to_device(rows);
    ape = to_device(std::vector<float>(p.ape, p.ape + std::size_t(p.ratio) * width));
    norm = to_device(std::vector<float>(p.norm, p.norm + p.dim));
    inv_freq = to_device(*p.inv_freq);
}

CompressorArgs CompressorDeviceCase::args(const float* kv, const float* gate, int n, std::int64_t start) const {
    CompressorArgs a;
    a.kv = kv;
    a.gate = gate;
    a.ape = ape.as<float>();
    a.norm = norm.as<float>();
    a.inv_freq = inv_freq.as<float>();
    a.pending_kv = pending_kv.as<float>();
    a.pending_gate = pending_gate.as<float>();
    a.prev_kv = overlap ? prev_kv.as<float>() : nullptr;
    a.prev_gate = overlap ? prev_gate.as<float>() : nullptr;
    a.entries = entries.as<float>();
    a.n = n;
    a.ratio = ratio;
    a.dim = dim;
    a.rope_dim = rope_dim;
    a.overlap = overlap;
    a.eps = eps;
    a.start = start;
    return a;
}

}  // namespace aff::gpu
