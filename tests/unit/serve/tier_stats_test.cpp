// The expert tiers' counters on their way to /metrics: a fake backend (a scripted Sequence
// whose tier_stats() reports known counters that grow with each forward) under the server's
// PrefixCachedSequence, which publishes the backend's counters after every forward for the
// scrape thread; before any forward, and for a backend without tiers, nothing is published
// and Metrics leaves the aff_tier_* lines out. The rendered values are the backend's.
#include "libaff/serve/cached_sequence.hpp"
#include "libaff/serve/metrics.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

namespace {

class FakeTieredBackend final : public aff::Sequence {
public:
    explicit FakeTieredBackend(bool tiered) : tiered_(tiered) {}
    std::string describe() const override { return "fake"; }
    std::size_t vocab_size() const override { return 4; }
    std::int64_t position() const override { return position_; }
    void reset() override { position_ = 0; }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        position_ += std::int64_t(tokens.size());
        calls_ += 1;
        return std::vector<float>(all_logits ? tokens.size() * 4 : 4, 0.5f);
    }
    std::optional<aff::TierStats> tier_stats() const override {
        if (!tiered_) return std::nullopt;
        aff::TierStats t;  // 6 reads a token, two thirds on the GPU; one move and 1 ms of stall a call
        t.tokens = std::uint64_t(position_);
        t.expert_reads = 6 * t.tokens;
        t.gpu_hits = 4 * t.tokens;
        t.host_hits = 2 * t.tokens;
        t.pcie_bytes = 2 * t.tokens * 1000;
        t.moves = calls_;
        t.moved_bytes = calls_ * 2000;
        t.stall_seconds = 0.001 * double(calls_);
        t.stalled_calls = calls_;
        t.gpu_experts = 8;
        t.host_experts = 24;
        return t;
    }

private:
    bool tiered_;
    std::int64_t position_ = 0;
    std::uint64_t calls_ = 0;
};

std::string line_of(const std::string& text, const std::string& name) {
    const std::size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return {};
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

}  // namespace

TEST_CASE("the server publishes a tiered backend's counters after each forward", "[serve]") {
    aff::serve::PrefixCachedSequence seq(std::make_unique<FakeTieredBackend>(true), std::vector<bool>(4, true), -1);
    CHECK_FALSE(seq.published_tier_stats());  // nothing ran yet
    const std::int32_t prompt[3] = {0, 1, 2}, one[1] = {3};
    seq.forward(prompt, false);  // a prompt: two backend calls (prefix, then its last token)
    seq.forward(one, false);
    const std::optional<aff::TierStats> t = seq.published_tier_stats();
    REQUIRE(t);
    CHECK(t->tokens == 4);
    CHECK(t->gpu_hits == 16);
    CHECK(t->host_hits == 8);
    CHECK(t->moves == 3);
    CHECK(t->stalled_calls == 3);

    const std::string text = aff::serve::Metrics().render(0, false, true, std::nullopt, t);
    CHECK(line_of(text, "aff_tier_tokens_total") == "aff_tier_tokens_total 4");
    CHECK(text.find("\naff_tier_hit_ratio{tier=\"gpu\"} 0.666667\n") != std::string::npos);
    CHECK(text.find("\naff_tier_hit_ratio{tier=\"host\"} 0.333333\n") != std::string::npos);
    CHECK(text.find("\naff_tier_reads_total{tier=\"ssd\"} 0\n") != std::string::npos);
    CHECK(line_of(text, "aff_tier_pcie_bytes_per_token") == "aff_tier_pcie_bytes_per_token 2000");
    CHECK(line_of(text, "aff_tier_moves_per_token") == "aff_tier_moves_per_token 0.75");
    CHECK(line_of(text, "aff_tier_mover_stall_seconds_total") == "aff_tier_mover_stall_seconds_total 0.003");
    CHECK(text.find("\naff_tier_experts{tier=\"host\"} 24\n") != std::string::npos);
}

TEST_CASE("a backend without tiers publishes nothing and /metrics has no tier lines", "[serve]") {
    aff::serve::PrefixCachedSequence seq(std::make_unique<FakeTieredBackend>(false), std::vector<bool>(4, true), -1);
    const std::int32_t one[1] = {1};
    seq.forward(one, false);
    CHECK_FALSE(seq.published_tier_stats());
    CHECK(aff::serve::Metrics().render(0, false, true, std::nullopt, seq.published_tier_stats()).find("aff_tier") ==
          std::string::npos);
}
