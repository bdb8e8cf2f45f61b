// Rewind for backends whose state a forward call changes in a few known places: before each
// forward call (a chunk of tokens) the backend saves what that call is about to overwrite
// (an undo record), and rewind(p) undoes the newest chunks down to p. A chunk that
// straddles p is undone to its start and its first p - start tokens are run again, so a
// rewind into the middle of a chunk costs a forward of that part (a rewind to a chunk's
// start, e.g. of a decode step, costs only the copy back). Records are kept for the last
// rewind_depth() tokens, none while the depth is 0 (the default), so a sequence nobody
// rewinds pays nothing; records dropped go back to the backend (recycle) for reuse. What "the same as before" means after a replayed part is the
// backend's: the CPU reference's logits do not depend on how tokens are split into calls,
// so there a rewound sequence is bit for bit a fresh run's.
#pragma once

#include "libaff/runtime/sequence.hpp"

#include <deque>
#include <memory>

namespace aff {

class UndoLogSequence : public Sequence {
public:
    // What a backend saves before a forward call (its own kind, known only to it).
    class UndoRecord {
    public:
        virtual ~UndoRecord() = default;
    };

    // Run the tokens through run() / run_ids(), first taking their undo record when the depth
    // is above 0.
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) final;
    std::vector<std::int32_t> forward_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                          std::size_t candidates, const RowSampling* sampling = nullptr) final;
    void set_rewind_depth(std::size_t tokens) override;
    std::size_t rewind_depth() const override { return depth_; }
    std::int64_t rewind_floor() const override;

protected:    // What forwarding `tokens` at position() will change, saved so apply_undo can put it back.
    virtual std::unique_ptr<UndoRecord> take_undo(std::span<const std::int32_t> tokens) const = 0;
    // Puts the state back as it was when the record was taken (position included).
    virtual void apply_undo(const UndoRecord& record) = 0;
    // The backend's forward (Sequence::forward's contract).
    virtual std::vector<float> run(std::span<const std::int32_t> tokens, bool all_logits) = 0;
    // The backend's forward_ids (Sequence::forward_ids' contract); by default picks from run's rows.
    virtual std::vector<std::int32_t> run_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                              std::size_t candidates, const RowSampling* sampling);
    // Drops every record: the state was replaced (reset, restore) and cannot go back.
    void forget_history() { log_.clear(); }
    // A record no rewind can need any more (trimmed, or applied by a rewind), handed back so
    // that a backend whose records hold device buffers can reuse them in take_undo rather
    // than allocate per call; by default it is freed.
    virtual void recycle(std::unique_ptr<UndoRecord> record) { (void)record; }

private:
    void rewind_to(std::int64_t position) override;
    // `call` (run or run_ids on the tokens), with the tokens' undo record kept when the depth is above 0.
    template <class Call>
    auto logged(std::span<const std::int32_t> tokens, Call call);
    // Drops records no rewind within the depth can need.
    void trim();

    struct Chunk {
        std::int64_t start = 0;
        std::vector<std::int32_t> tokens;
        std::unique_ptr<UndoRecord> undo;
    };
    std::deque<Chunk> log_;  // oldest first; contiguous, the newest ending at position()
    std::size_t depth_ = 0;
};

}  // namespace aff
