// UndoLogSequence hands the undo records it no longer needs back to its backend (recycle), so
// a backend whose records own device buffers (the GPU sequence) reuses them instead of
// allocating per call: over many drafting cycles (a verify call, a rewind into it, the
// replay) a toy backend that reuses what it is handed allocates only the few records that are
// alive at once, and the rewound sequence is still the one that never ran the rejected tokens;
// and a ring state with records of the slots a call overwrites (as the GPU's) rewound through
// recycled records over the GPU snapshot check's calls is a fresh sequence's, value for value.
#include "libaff/runtime/undo_log.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
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

namespace {

// As the GPU sequence's state and records are: a ring of W slots that a call of n tokens from
// position P overwrites at (P .. P+n-1) mod W, and a record holding the slots it will
// overwrite (their old values) and P. A record reused while a rewind still needed it, or put
// back with another call's slots, leaves ring values a fresh sequence does not have.
class RingSequence final : public aff::UndoLogSequence {
public:
    static constexpr std::size_t W = 4;
    std::string describe() const override { return "ring"; }
    std::size_t vocab_size() const override { return 2; }
    std::int64_t position() const override { return position_; }
    void reset() override {
        ring.fill(-1);
        position_ = 0;
        forget_history();
    }
    std::array<std::int32_t, W> ring{-1, -1, -1, -1};
    int allocated = 0;

private:
    struct Record final : UndoRecord {
        std::int64_t position = 0;
        std::vector<std::int32_t> old;  // slots position mod W on, as many as the call writes
    };
    std::unique_ptr<UndoRecord> take_undo(std::span<const std::int32_t> t) const override {
        std::unique_ptr<Record> r;
        if (spare_.empty()) {
            r = std::make_unique<Record>();
            ++const_cast<RingSequence*>(this)->allocated;
        } else {
            r = std::move(spare_.back());
            spare_.pop_back();
        }
        r->position = position_;
        r->old.clear();
        for (std::size_t i = 0; i < std::min(t.size(), W); ++i) r->old.push_back(ring[(position_ + i) % W]);
        return r;
    }
    void apply_undo(const UndoRecord& record) override {
        const auto& r = static_cast<const Record&>(record);
        for (std::size_t i = 0; i < r.old.size(); ++i) ring[(r.position + i) % W] = r.old[i];
        position_ = r.position;
    }
    void recycle(std::unique_ptr<UndoRecord> record) override {
        spare_.emplace_back(static_cast<Record*>(record.release()));
    }
    std::vector<float> run(std::span<const std::int32_t> t, bool all_logits) override {
        for (std::int32_t v : t) ring[std::size_t(position_++) % W] = v;
        return std::vector<float>(all_logits ? t.size() * 2 : 2, 0.0f);
    }
    std::int64_t position_ = 0;
    mutable std::vector<std::unique_ptr<Record>> spare_;
};

}  // namespace

TEST_CASE("recycled undo records rewind a ring state as a fresh sequence's (the GPU snapshot check's calls)",
          "[runtime]") {
    // aff_gpu_tests' "sequence rewind: 3 decode steps back, into a call of 6", at depth 8: a
    // prompt of 20, 5 steps, rewind to 22 (3 records back), a call of 2, a call of 6 (the
    // trim recycles the prompt's and two steps' records), rewind to 27 (into the call of 6:
    // its record is applied, recycled and taken again for the replay of 3), a call of 2.
    RingSequence rs, fr;
    rs.set_rewind_depth(8);
    std::vector<std::int32_t> p20(20);
    for (int i = 0; i < 20; ++i) p20[std::size_t(i)] = 100 + i;
    const std::vector<std::int32_t> steps{200, 201, 202, 203, 204}, six{300, 301, 302, 303, 304, 305},
        next{400, 401};
    rs.forward(p20, false);
    for (std::int32_t t : steps) rs.forward(std::span(&t, 1), false);
    rs.rewind(22);
    fr.forward(p20, false);
    fr.forward(std::span(steps).first(2), false);
    REQUIRE(rs.position() == 22);
    CHECK(rs.ring == fr.ring);  // slots of 20, 21 from the steps, 18, 19 from the prompt
    rs.forward(next, true);
    fr.forward(next, true);
    rs.forward(six, false);
    rs.rewind(27);
    fr.forward(std::span(six).first(3), false);
    REQUIRE(rs.position() == 27);
    CHECK(rs.ring == fr.ring);
    CHECK(rs.ring == std::array<std::int32_t, 4>{300, 301, 302, 401});  // 24..26 and 23 (slot 3)
    rs.forward(next, true);
    fr.forward(next, true);
    CHECK(rs.ring == fr.ring);
    // Six records for the prompt and the steps; every later call reused a recycled one.
    CHECK(rs.allocated == 6);
}
