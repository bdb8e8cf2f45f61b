// The device halves of the attention and compressor cases (kernel_cases.hpp): uploads and the
// kernels' argument structs, so gpucheck and the device tests fill them one way.
#include "aff/gpu/kernel_cases.hpp"

namespace aff::gpu {
namespace {

template <class T>
Buffer copy_to_device(const std::vector<T>& v) {
    Buffer b(std::max<std::size_t>(v.size() * sizeof(T), 16));  // never empty: a null pointer is "absent" to a kernel
    if (!v.empty()) upload(b, v.data(), v.size() * sizeof(T));
    return b;
}

}  // namespace

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
    : q(copy_to_device(in.q)), kv(copy_to_device(in.kv)), ring(copy_to_device(in.ring)),
      entries(copy_to_device(in.entries)), sink(copy_to_device(in.sink)) {
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
        index = copy_to_device(in.index);
        index_count = copy_to_device(in.index_count);
        args.selected = index.as<std::int32_t>();
        args.selected_count = index_count.as<std::int32_t>();
        args.selected_stride = in.topk;
    }
}

CompressorDeviceCase::CompressorDeviceCase(const CompressorParams& p, const CompressorState& st, std::int64_t start,
                                           int tokens)
    : ratio(p.ratio), dim(p.dim), rope_dim(int(p.inv_freq->size()) * 2), overlap(p.overlap), eps(float(p.eps)),
      pending_kv(copy_to_device(st.pending_kv)), pending_gate(copy_to_device(st.pending_gate)),
      prev_kv(copy_to_device(st.prev_kv)), prev_gate(copy_to_device(st.prev_gate)) {
    const int width = p.overlap ? 2 * p.dim : p.dim;
    const int capacity = int((start + tokens) / p.ratio) + 1;
    std::vector<float> rows = st.entries;
    rows.resize(std::size_t(capacity) * p.dim, 0.0f);
    entries = copy_to_device(rows);
    ape = copy_to_device(std::vector<float>(p.ape, p.ape + std::size_t(p.ratio) * width));
    norm = copy_to_device(std::vector<float>(p.norm, p.norm + p.dim));
    inv_freq = copy_to_device(*p.inv_freq);
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
