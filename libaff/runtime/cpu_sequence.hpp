// The CPU reference forward (libaff/model/forward.hpp) as a Sequence: its state is plain host
// vectors (DecodeState), so a snapshot is a copy of it, and rewind keeps undo records
// (undo_log.hpp) of exactly the floats a forward call overwrites: the ring rows of the
// positions it stores, each compressor's pending-window rows it writes, the previous window
// (CSA) when a window closes, and the entry counts (entries are only appended, so a rewind
// truncates them). A decode step's record is one ring row and one pending row per layer and
// compressor. The CPU forward does not depend on how tokens are split into calls, so a
// rewound sequence holds exactly the state of a fresh run to that position and gives its
// logits bit for bit (tests/unit/runtime/sequence_rewind_test.cpp). The MTP layers' state is
// not touched by forward and not by rewind: the MTP drafter (mtp_drafter.hpp) keeps its own,
// fed with the trunk's final streams through a StreamObserver, and so does the DSpark drafter
// (dspark_drafter.hpp), fed with the tap layers' features.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/undo_log.hpp"

namespace aff {

// Sees the trunk's final residual streams (before the hyper head) of every forward call:
// `streams` is [n, hc_mult, D] for the n tokens run at positions start, start+1, ...
// Calls that a rewind replays are seen again.
class StreamObserver {
public:
    virtual ~StreamObserver() = default;
    virtual void on_streams(std::int64_t start, std::size_t n, std::span<const float> streams) = 0;
    // An observer that wants the DSpark tap features (DecodeState::taps) says so; it then also
    // gets them, [n, taps, D], after on_streams.
    virtual bool wants_taps() const { return false; }
    virtual void on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) {
        (void)start;
        (void)n;
        (void)taps;
    }
};

class CpuSequence final : public UndoLogSequence {
public:
    // `model` must outlive the sequence.
    explicit CpuSequence(const Model& model);

    std::string describe() const override { return "cpu: the reference forward"; }
    std::size_t vocab_size() const override;
    std::int64_t position() const override { return state_.position; }
    void reset() override;
    void set_route_observer(RouteObserver* observer) override { routes_ = observer; }
    // Not owned; null: none.
    void set_stream_observer(StreamObserver* observer) { streams_ = observer; }
    bool can_snapshot() const override { return true; }
    std::unique_ptr<SequenceSnapshot> snapshot() const override;
    // Throws usage for a snapshot another kind of sequence took.
    void restore(const SequenceSnapshot& snapshot) override;

    // The state itself, for tests that compare it with a fresh run's.
    const DecodeState& state() const { return state_; }

private:
    std::unique_ptr<UndoRecord> take_undo(std::span<const std::int32_t> tokens) const override;
    void apply_undo(const UndoRecord& record) override;
    std::vector<float> run(std::span<const std::int32_t> tokens, bool all_logits) override;

    const Model& model_;
    DecodeState state_;
    RouteObserver* routes_ = nullptr;
    StreamObserver* streams_ = nullptr;
    std::vector<float> stream_rows_, tap_rows_;
};

// Host bytes of a CPU decode state: its float vectors and the per-layer records.
std::size_t host_state_bytes(const DecodeState& state);

}  // namespace aff
