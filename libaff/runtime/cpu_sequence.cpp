// CpuSequence (cpu_sequence.hpp): the CPU reference forward behind the Sequence seam, its
// snapshots (a copy of the state) and its undo records (the rows a forward call overwrites).
#include "libaff/runtime/cpu_sequence.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff {
namespace {

// The CPU sequence state is plain host vectors (forward.hpp): a snapshot is a copy of it.
class CpuSnapshot final : public SequenceSnapshot {
public:
    explicit CpuSnapshot(DecodeState s) : state(std::move(s)) {}
    std::int64_t position() const override { return state.position; }
    std::size_t bytes() const override { return host_state_bytes(state) + sizeof(*this); }
    DecodeState state;
};

// Rows [first, first + count) of an array of `slots` rows of `width` floats, the row index
// taken modulo `slots` (a ring): one or two runs of the array, as they were.
struct SavedRun {
    std::size_t offset = 0;
    std::vector<float> values;
};

std::vector<SavedRun> save_rows(const std::vector<float>& array, int width, int slots, int first, int count) {
    std::vector<SavedRun> runs;
    count = std::min(count, slots);
    while (count > 0) {
        const int here = std::min(count, slots - first);
        const std::size_t begin = std::size_t(first) * width, end = begin + std::size_t(here) * width;
        runs.push_back({begin, std::vector<float>(array.begin() + std::ptrdiff_t(begin), array.begin() + std::ptrdiff_t(end))});
        count -= here;
        first = 0;
    }
    return runs;
}

void put_back(std::vector<float>& array, const std::vector<SavedRun>& runs) {
    for (const SavedRun& r : runs) std::copy(r.values.begin(), r.values.end(), array.begin() + std::ptrdiff_t(r.offset));
}

// What compress_tokens (model/attention_ops.cpp) changes in one compressor for a chunk of n
// tokens: the pending rows of the slots the tokens land in, the previous window when a window
// completes (CSA), the entries appended and the counters.
struct CompressorUndo {
    bool used = false;
    int pending = 0, count = 0;
    bool has_prev = false;
    std::size_t entry_floats = 0;
    std::vector<SavedRun> pending_kv, pending_gate;
    std::vector<float> prev_kv, prev_gate;  // empty unless a window completes in the chunk
};

CompressorUndo save_compressor(const CompressorWeights& w, const CompressorState& st, int n) {
    CompressorUndo u;
    u.used = true;
    u.pending = st.pending;
    u.count = st.count;
    u.has_prev = st.has_prev;
    u.entry_floats = st.entries.size();
    const int width = w.overlap ? 2 * w.dim : w.dim;
    u.pending_kv = save_rows(st.pending_kv, width, w.ratio, st.pending, n);
    u.pending_gate = save_rows(st.pending_gate, width, w.ratio, st.pending, n);
    if (w.overlap && st.pending + n >= w.ratio) {
        u.prev_kv = st.prev_kv;
        u.prev_gate = st.prev_gate;
    }
    return u;
}

void undo_compressor(const CompressorUndo& u, CompressorState& st) {
    if (!u.used) return;
    put_back(st.pending_kv, u.pending_kv);
    put_back(st.pending_gate, u.pending_gate);
    if (!u.prev_kv.empty()) {
        st.prev_kv = u.prev_kv;
        st.prev_gate = u.prev_gate;
    }
    st.entries.resize(u.entry_floats);
    st.pending = u.pending;
    st.count = u.count;
    st.has_prev = u.has_prev;
}

struct LayerUndo {
    std::vector<SavedRun> ring;
    CompressorUndo compressor, indexer;
};

}  // namespace

// One forward call's record: the position it started at and every main layer's undo.
class CpuUndo final : public UndoLogSequence::UndoRecord {
public:
    std::int64_t position = 0;
    std::vector<LayerUndo> layers;
};

std::size_t host_state_bytes(const DecodeState& state) {
    std::size_t floats = 0;
    auto add = [&](const std::vector<LayerState>& layers) {
        for (const LayerState& l : layers) {
            floats += l.ring.size();
            for (const CompressorState* c : {&l.compressor, &l.indexer})
                floats += c->pending_kv.size() + c->pending_gate.size() + c->prev_kv.size() + c->prev_gate.size() +
                          c->entries.size();
        }
    };
    add(state.layers);
    add(state.mtp);
    return floats * sizeof(float) + (state.layers.size() + state.mtp.size()) * sizeof(LayerState);
}

CpuSequence::CpuSequence(const Model& model) : model_(model), state_(model.new_state()) {}

std::size_t CpuSequence::vocab_size() const { return static_cast<std::size_t>(model_.config().vocab_size); }

void CpuSequence::reset() {
    state_ = model_.new_state();
    forget_history();
}

std::unique_ptr<SequenceSnapshot> CpuSequence::snapshot() const { return std::make_unique<CpuSnapshot>(state_); }

void CpuSequence::restore(const SequenceSnapshot& snapshot) {
    const auto* s = dynamic_cast<const CpuSnapshot*>(&snapshot);
    if (!s) throw_usage("restore: the snapshot was not taken by the CPU backend");
    state_ = s->state;
    forget_history();
}

std::vector<float> CpuSequence::run(std::span<const std::int32_t> tokens, bool all_logits) {
    state_.routes = routes_;  // reset() and restore() replace the state, not the observer
    if (!streams_) return model_.forward(state_, tokens, all_logits);
    const std::int64_t start = state_.position;
    const bool taps = streams_->wants_taps();
    state_.taps = taps ? &tap_rows_ : nullptr;
    std::vector<float> logits = model_.forward(state_, tokens, all_logits, &stream_rows_);
    state_.taps = nullptr;  // the state may be copied (snapshots): it must not point here
    streams_->on_streams(start, tokens.size(), stream_rows_);
    if (taps) streams_->on_taps(start, tokens.size(), tap_rows_);
    return logits;
}

std::unique_ptr<UndoLogSequence::UndoRecord> CpuSequence::take_undo(std::span<const std::int32_t> tokens) const {
    const ModelConfig& c = model_.config();
    const int n = static_cast<int>(tokens.size()), W = c.sliding_window;
    auto undo = std::make_unique<CpuUndo>();
    undo->position = state_.position;
    undo->layers.resize(state_.layers.size());
    // ring_store writes the slots of the chunk's last min(n, W) positions.
    const int stored = std::min(n, W);
    const int first_slot = static_cast<int>((state_.position + n - stored) % W);
    for (std::size_t l = 0; l < state_.layers.size(); ++l) {
        const LayerState& st = state_.layers[l];
        const AttentionWeights& a = model_.weights().layers[l].attn;
        LayerUndo& u = undo->layers[l];
        u.ring = save_rows(st.ring, c.head_dim, W, first_slot, stored);
        if (a.has_compressor) u.compressor = save_compressor(a.compressor, st.compressor, n);
        if (a.has_indexer) u.indexer = save_compressor(a.index_compressor, st.indexer, n);
    }
    return undo;
}

void CpuSequence::apply_undo(const UndoRecord& record) {
    const auto& undo = static_cast<const CpuUndo&>(record);
    for (std::size_t l = 0; l < state_.layers.size(); ++l) {
        LayerState& st = state_.layers[l];
        const LayerUndo& u = undo.layers[l];
        put_back(st.ring, u.ring);
        undo_compressor(u.compressor, st.compressor);
        undo_compressor(u.indexer, st.indexer);
    }
    state_.position = undo.position;
}

}  // namespace aff
