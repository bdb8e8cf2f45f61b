// UndoLogSequence hands the undo records it no longer needs back to its backend (recycle), so
// a backend whose records own device buffers (the GPU sequence) reuses them instead of
// allocating per call: over many drafting cycles (a verify call, a rewind into it, the
// replay) a toy backend that reuses what it is handed allocates only the few records that are
// alive at once, and the rewound sequence is still the one that never ran the rejected tokens.
#include "libaff/runtime/undo_log.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

namespace {

// State: the tokens run. A record: the position before its call.
class ToySequence final : public aff::UndoLogSequence {
public:
    std::string describe() const override { return "toy"; }
    std::size_t vocab_size() const override { return 2; }
    std::int64_t position() const override { return std::int64_t(tokens.size()); }
    void reset() override {
        tokens.clear();
        forget_history();
    }
    std::vector<std::int32_t> tokens;
    int allocated = 0, recycled = 0;

private:
    struct Record final : UndoRecord {
        std::int64_t position = 0;
    };
    std::unique_ptr<UndoRecord> take_undo(std::span<const std::int32_t>) const override {
        std::unique_ptr<Record> r;
        if (spare_.empty()) {
            r = std::make_unique<Record>();
            ++const_cast<ToySequence*>(this)->allocated;
        } else {
            r = std::move(spare_.back());
            spare_.pop_back();
        }
        r->position = position();
        return r;
    }
    void apply_undo(const UndoRecord& record) override {
        tokens.resize(std::size_t(static_cast<const Record&>(record).position));
    }
    void recycle(std::unique_ptr<UndoRecord> record) override {
        ++recycled;
        spare_.emplace_back(static_cast<Record*>(record.release()));
    }
    std::vector<float> run(std::span<const std::int32_t> t, bool all_logits) override {
        tokens.insert(tokens.end(), t.begin(), t.end());
        return std::vector<float>(all_logits ? t.size() * 2 : 2, 0.0f);
    }
    mutable std::vector<std::unique_ptr<Record>> spare_;
};

}  // namespace

TEST_CASE("undo records the log drops go back to the backend for reuse", "[runtime]") {
    ToySequence seq;
    const std::vector<std::int32_t> prompt{1, 2, 3, 4, 5};
    seq.forward(prompt, false);
    seq.set_rewind_depth(4);
    std::vector<std::int32_t> want = prompt;
    for (int cycle = 0; cycle < 50; ++cycle) {
        // A verify call of 4 tokens (the token and 3 guesses), one guess accepted: rewind to
        // 2 tokens in, which undoes the call and replays its first 2 tokens.
        const std::int32_t t = 10 + cycle;
        const std::vector<std::int32_t> verify{t, t + 1, t + 2, t + 3};
        const std::int64_t at = seq.position();
        seq.forward(verify, true);
        seq.rewind(at + 2);
        want.push_back(t);
        want.push_back(t + 1);
        REQUIRE(seq.tokens == want);
    }
    // Each cycle hands back the verify call's record (undone) and, from the second on, the
    // last replay's (trimmed: it ends 4 tokens back); two records are ever alive at once.
    CHECK(seq.recycled == 1 + 2 * 49);
    CHECK(seq.allocated == 2);
    seq.set_rewind_depth(0);
    CHECK(seq.rewind_floor() == seq.position());
}
