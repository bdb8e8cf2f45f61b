// PrefixCachedSequence::forward_ids (cached_sequence.hpp): the server masks ids without text
// to -infinity, so its greedy picks must never be such an id. Where the ids with text are a
// prefix of the vocabulary (the padded tail) it hands the backend a cut, and the backend picks
// where its logits are; where the mask has holes, and for the prompt, it picks from its own
// masked rows. A fake backend whose largest logit is always an id without text shows both.
#include "libaff/serve/cached_sequence.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

namespace {

constexpr std::size_t kVocab = 8;

// Logits rising with the id, so the last id wins unless something keeps it out; remembers
// what forward_ids was asked for.
class RisingBackend final : public aff::Sequence {
public:
    explicit RisingBackend(std::vector<std::size_t>& asked) : asked_(asked) {}
    std::string describe() const override { return "rising"; }
    std::size_t vocab_size() const override { return kVocab; }
    std::int64_t position() const override { return position_; }
    void reset() override { position_ = 0; }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        position_ += std::int64_t(tokens.size());
        const std::size_t rows = all_logits ? tokens.size() : 1;
        std::vector<float> out(rows * kVocab);
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = float(i % kVocab);
        return out;
    }
    std::vector<std::int32_t> forward_ids(std::span<const std::int32_t> tokens, bool all_rows, std::size_t candidates,
                                          const aff::RowSampling* sampling = nullptr) override {
        asked_.push_back(candidates);
        return Sequence::forward_ids(tokens, all_rows, candidates, sampling);
    }

private:
    std::vector<std::size_t>& asked_;
    std::int64_t position_ = 0;
};

}  // namespace

TEST_CASE("the server's greedy picks never take an id without text", "[serve]") {
    const std::int32_t prompt[3] = {1, 2, 3}, step[1] = {4}, verify[3] = {4, 5, 6};
    SECTION("a padded tail: the backend picks below the cut") {
        std::vector<std::size_t> asked;
        std::vector<bool> has_text(kVocab, true);
        has_text[5] = has_text[6] = has_text[7] = false;
        aff::serve::PrefixCachedSequence seq(std::make_unique<RisingBackend>(asked), has_text, -1);
        // The prompt goes through the cache's path and is picked from the masked row.
        CHECK(seq.forward_ids(prompt, false, kVocab) == std::vector<std::int32_t>{4});
        CHECK(asked.empty());
        CHECK(seq.forward_ids(step, false, kVocab) == std::vector<std::int32_t>{4});
        CHECK(seq.forward_ids(verify, true, kVocab) == std::vector<std::int32_t>{4, 4, 4});
        CHECK(asked == std::vector<std::size_t>{5, 5});
        CHECK(seq.forward_ids(step, false, 3) == std::vector<std::int32_t>{2});  // a tighter cut of the caller's
        CHECK(asked.back() == 3);
        CHECK(seq.position() == 8);
    }
    SECTION("holes in the mask: picks from the masked rows") {
        std::vector<std::size_t> asked;
        std::vector<bool> has_text(kVocab, true);
        has_text[7] = has_text[3] = false;
        aff::serve::PrefixCachedSequence seq(std::make_unique<RisingBackend>(asked), has_text, -1);
        CHECK(seq.forward_ids(prompt, false, kVocab) == std::vector<std::int32_t>{6});
        CHECK(seq.forward_ids(verify, true, kVocab) == std::vector<std::int32_t>{6, 6, 6});
        CHECK(seq.forward_ids(step, false, 5) == std::vector<std::int32_t>{4});  // 3 has no text
        CHECK(asked.empty());
        CHECK(seq.position() == 7);
    }
}
