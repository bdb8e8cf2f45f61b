// Tests for speculative decoding with the DSpark drafter (runtime/dspark_drafter.hpp) on a
// random checkpoint with mtp.0..2 DSpark stages (tests/common/random_dspark_checkpoint.hpp):
// greedy output with drafts is the output without, token and logit bit for bit, at every draft
// length 1..5 and several prompts; the guesses are the Markov-corrected block's argmax and
// their number follows the confidence rule; the rings after a generation (greedy with
// accepted prefixes, sampled) are a fresh build's over the trunk's positions; a runner with a
// backend-side greedy chain (DsparkRunner::greedy, the GPU's device path) gives the sequential
// proposal and confidences exactly, and is asked only at temperature 0; and the first
// speculatively sampled token is distributed as the target's (chi-square at a stated
// false-alarm rate, with a control that sees a wrong rule). The random drafter's acceptance means nothing and is not
// asserted.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_dspark_runner.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/sampler.hpp"

#include "common/dspark_helpers.hpp"
#include "common/random_dspark_checkpoint.hpp"
#include "unit/temp_dir.hpp"

#include "unit/runtime/generate_outcome.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <cmath>
#include <string>
#include <vector>

namespace {

const std::string& checkpoint(bool small) {
    static aff::test::TempDir dir;
    static const std::string tiny = [] {
        aff::test::write_random_dspark_checkpoint(dir / "tiny", 3);
        return dir / "tiny";
    }();
    static const std::string little = [] {
        aff::test::write_random_dspark_checkpoint(dir / "small", 5, {}, aff::test::small_v4_geometry(), false);
        return dir / "small";
    }();
    return small ? little : tiny;
}

using aff::test::generate_on;
using aff::test::Outcome;

std::vector<std::int32_t> prompt_of(int n, int salt) {
    std::vector<std::int32_t> t{0};
    for (int i = 1; i < n; ++i) t.push_back(2 + (i * 37 + i * i * 11 + salt * 101) % 1000);
    return t;
}

using aff::test::fresh_dspark_rings;
using aff::test::Prompted;

}  // namespace

TEST_CASE("greedy output with DSpark drafts is the output without, token and logit bit for bit", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    REQUIRE(model->has_dspark());
    for (int salt = 0; salt < 3; ++salt) {
        INFO("prompt " << salt);
        aff::GenerateOptions opt;
        opt.prompt = prompt_of(6 + 11 * salt, salt);  // 6, 17, 28 tokens: within and past the window
        opt.max_new_tokens = 16;
        opt.sampling.temperature = 0;
        aff::CpuSequence plain_seq(*model);
        const Outcome plain = generate_on(plain_seq, opt, nullptr);
        REQUIRE(plain.tokens.size() == 16);
        for (std::size_t k = 1; k <= 5; ++k) {
            // Every guess verified (no threshold), and at k = 5 also the default threshold's cut.
            for (float survival : {0.0f, aff::dspark_min_survival}) {
                if (survival > 0 && k < 5) continue;
                INFO("draft-max " << k << ", survival threshold " << survival);
                aff::CpuSequence seq(*model);
                aff::DsparkDrafter drafter(*model, seq, k, survival);
                REQUIRE(drafter.max_tokens() == k);
                const Outcome drafted = generate_on(seq, opt, &drafter);
                CHECK(drafted.tokens == plain.tokens);
                CHECK(drafted.logits == plain.logits);  // bit for bit
                CHECK(drafted.end_position == plain.end_position);
                CHECK(seq.rewind_depth() == 0);
                const aff::GenerateStats& s = drafted.stats;
                CHECK(s.verify_calls > 0);
                REQUIRE(s.drafted_at.size() <= k);
                std::size_t drafted_sum = 0, accepted_sum = 0;
                for (std::size_t i = 0; i < s.drafted_at.size(); ++i) {
                    drafted_sum += s.drafted_at[i];
                    accepted_sum += s.accepted_at[i];
                    CHECK(s.accepted_at[i] <= s.drafted_at[i]);
                }
                CHECK(drafted_sum == s.drafted_tokens);
                CHECK(accepted_sum == s.accepted_tokens);
                CHECK(s.decode_forwards + s.accepted_tokens == plain.stats.decode_forwards);
                // Without a threshold every verify call checks k guesses (while the budget lasts).
                if (survival == 0.0f) CHECK(s.drafted_at.size() == k);
            }
        }
        // A longer request than the block: the drafter proposes at most γ = 5.
        aff::CpuSequence seq(*model);
        aff::DsparkDrafter drafter(*model, seq, 16, 0.0f);
        CHECK(drafter.max_tokens() == 5);
        const Outcome drafted = generate_on(seq, opt, &drafter);
        CHECK(drafted.tokens == plain.tokens);
        CHECK(drafted.stats.drafted_at.size() == 5);
    }
}

TEST_CASE("DSpark guesses are the Markov-corrected argmax, as many as the confidence rule allows", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    const int V = 1024, D = 256;
    const auto prompt = prompt_of(20, 4);
    for (float survival : {0.0f, 0.25f, 0.5f, 2.0f}) {
        INFO("threshold " << survival);
        aff::CpuSequence seq(*model);
        aff::DsparkDrafter drafter(*model, seq, 5, survival);
        aff::SamplerParams greedy;
        greedy.temperature = 0;
        drafter.start(greedy);
        seq.forward(std::span(prompt).first(19), false);  // the trunk runs 0..18; the anchor is at 19
        const std::vector<std::int32_t> guesses = drafter.propose(prompt);
        // The rule: guess i while Π_{j≤i} c_j ≥ threshold, the first always.
        const auto c = drafter.confidences();
        std::size_t want = 1;
        float product = c[0];
        for (std::size_t i = 1; i < 5; ++i) {
            product *= c[i];
            if (product < survival) break;
            ++want;
        }
        CHECK(guesses.size() == want);
        if (survival == 0.0f) CHECK(guesses.size() == 5);
        if (survival == 2.0f) CHECK(guesses.size() == 1);
        // By hand: a fresh build of the rings, the block, the sequential correction.
        aff::DsparkState st = fresh_dspark_rings(*model, prompt, 19);
        aff::DsparkBlock b = model->dspark_block(st, prompt.back());
        std::int32_t prev = prompt.back();
        for (std::size_t i = 0; i < guesses.size(); ++i) {
            std::span<float> row = std::span<float>(b.logits).subspan(i * V, V);
            CHECK(model->dspark_confidence(std::span<const float>(b.y).subspan(i * D, D), prev) == c[i]);
            model->dspark_markov(prev, row);
            std::int32_t best = 0;
            for (int v = 1; v < V; ++v)
                if (row[std::size_t(v)] > row[std::size_t(best)]) best = v;
            CHECK(guesses[i] == best);
            prev = best;
        }
        CHECK(drafter.draft_distribution(0).empty());  // plain guesses at temperature 0
    }
}

TEST_CASE("the DSpark rings after a generation are a fresh build's over the trunk's positions", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    for (auto [temperature, prompt] : {std::pair{0.0f, 9}, std::pair{0.0f, 30}, std::pair{1.5f, 12}}) {
        INFO("temperature " << temperature << ", prompt " << prompt);
        aff::GenerateOptions opt;
        opt.prompt = prompt_of(prompt, 6);
        opt.max_new_tokens = 30;
        opt.sampling.temperature = temperature;
        // Sampled at a high temperature, two random models' broad distributions overlap: guesses are
        // often kept by min(1, p/q).
        opt.sampling.seed = 5;
        aff::CpuSequence seq(*model);
        aff::DsparkDrafter dspark(*model, seq, 5, 0.0f);
        Outcome run;
        if (temperature == 0) {
            // Greedy on a random model keeps almost no guess: put in the run's own tokens.
            aff::CpuSequence plain_seq(*model);
            const Outcome plain = generate_on(plain_seq, opt, nullptr);
            Prompted prompted(dspark, plain.tokens, opt.prompt.size());
            run = generate_on(seq, opt, &prompted);
            CHECK(run.tokens == plain.tokens);
        } else {
            run = generate_on(seq, opt, &dspark);
        }
        // Guesses were kept and rejected.
        REQUIRE(run.stats.accepted_tokens > 0);
        REQUIRE(run.stats.accepted_tokens < run.stats.drafted_tokens);
        std::vector<std::int32_t> all = opt.prompt;
        all.insert(all.end(), run.tokens.begin(), run.tokens.end());
        const std::int64_t P = dspark.runner().position();
        REQUIRE(P > std::int64_t(opt.prompt.size()));
        REQUIRE(P < std::int64_t(all.size()));
        const aff::DsparkState fresh = fresh_dspark_rings(*model, all, P);
        for (std::size_t s = 0; s < 3; ++s) CHECK(dspark.runner().ring(s) == fresh.stages[s].ring);  // bit for bit
    }
}

TEST_CASE("the CPU DSpark runner's rings, guess rows and confidences are the model's own", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    const aff::ModelConfig& c = model->config();
    const std::vector<std::int32_t> tokens = prompt_of(21, 4);
    aff::CpuSequence seq(*model);
    auto runner = aff::make_cpu_dspark_runner(*model, seq);
    {
        aff::test::RingFeed feed(*runner);
        seq.forward(std::span<const std::int32_t>(tokens).first(19), false);
        seq.forward(std::span<const std::int32_t>(tokens).subspan(19, 2), false);
    }
    CHECK(runner->trunk_position() == 21);
    REQUIRE(runner->position() == 21);
    aff::DsparkState want = fresh_dspark_rings(*model, tokens, 21);
    for (std::size_t s = 0; s < want.stages.size(); ++s) CHECK(runner->ring(s) == want.stages[s].ring);
    runner->block(tokens.back());
    const aff::DsparkBlock block = model->dspark_block(want, tokens.back());
    const std::size_t V = std::size_t(c.vocab_size), D = std::size_t(c.hidden_size);
    for (std::int32_t prev : {tokens.back(), std::int32_t(7)})
        for (std::size_t i = 0; i < std::size_t(c.dspark.block_size); ++i) {
            std::vector<float> row(block.logits.begin() + std::ptrdiff_t(i * V), block.logits.begin() + std::ptrdiff_t((i + 1) * V));
            model->dspark_markov(prev, row);
            CHECK(runner->guess_logits(i, prev) == row);
            CHECK(runner->confidence(i, prev) == model->dspark_confidence(std::span<const float>(block.y).subspan(i * D, D), prev));
        }
    CHECK_THROWS_AS(runner->guess_logits(std::size_t(c.dspark.block_size), 0), aff::Error);
    runner->restart(5);
    CHECK(runner->position() == 5);
}

TEST_CASE("the DSpark drafter refuses a model without stages and a draft length of 0", "[runtime]") {
    aff::ThreadPool pool(1);
    auto none = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/tiny-a-fp8", pool);
    aff::CpuSequence seq(*none);
    CHECK_THROWS_WITH(aff::DsparkDrafter(*none, seq, 3), "the model has no DSpark stages to draft with");
    auto with = aff::Model::load(checkpoint(true), pool);
    aff::CpuSequence seq2(*with);
    CHECK_THROWS_WITH(aff::DsparkDrafter(*with, seq2, 0), "the DSpark drafter needs at least one draft token");
}

namespace {
// Reports a distribution that gives its own guess almost no mass (and the rest evenly), not
// the one it drew from: every guess is then kept, so the tokens follow the drafter's
// distribution instead of the target's. A broken drafter, whose damage the test must see.
class Lying final : public aff::Drafter {
public:
    Lying(aff::DsparkDrafter& inner, std::size_t V) : inner_(inner), V_(V) {}
    std::size_t max_tokens() const override { return inner_.max_tokens(); }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> c) override {
        const std::vector<std::int32_t> g = inner_.propose(c);
        told_.assign(g.size() * V_, (1.0f - 1e-6f) / float(V_ - 1));
        for (std::size_t i = 0; i < g.size(); ++i) told_[i * V_ + std::size_t(g[i])] = 1e-6f;
        return g;
    }
    std::span<const float> draft_distribution(std::size_t i) const override {
        if (inner_.draft_distribution(i).empty()) return {};
        return std::span<const float>(told_).subspan(i * V_, V_);
    }
    void start(const aff::SamplerParams& s) override { inner_.start(s); }

private:
    aff::DsparkDrafter& inner_;
    std::size_t V_;
    std::vector<float> told_;
};

// Which quarter of the target's probability mass a token falls in: tokens sorted by
// probability, bucket b holding those whose cumulative mass before them is in [b/4, (b+1)/4).
// A drafter that is not the target puts its own mass elsewhere, most visibly in bucket 0 (few
// tokens, a quarter of the mass), so the buckets show a wrong acceptance rule.
std::vector<std::uint8_t> mass_quarters(const std::vector<float>& p) {
    std::vector<std::int32_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return p[std::size_t(a)] > p[std::size_t(b)]; });
    std::vector<std::uint8_t> bucket(p.size());
    double before = 0;
    for (std::int32_t t : order) {
        bucket[std::size_t(t)] = std::uint8_t(std::min(3, int(before * 4)));
        before += p[std::size_t(t)];
    }
    return bucket;
}

// Pearson's chi-square of the generated (t1, t2) pairs, t1 sampled from the prompt's logits and
// t2 by speculative sampling against DSpark's draw, counted in 4 x 4 cells of (bucket of t1
// under p(. | prompt), bucket of t2 under p(. | prompt, t1)), against the target's exact cell
// probabilities (every t1's distribution computed).
double dspark_chi_square(const aff::Model& model, bool lie, int runs) {
    aff::SamplerParams params;
    params.temperature = 1.0f;
    const std::vector<std::int32_t> prompt = {0, 17, 300, 5};
    const std::size_t V = std::size_t(model.config().vocab_size);
    aff::Sampler sampler(params);
    aff::DecodeState after_prompt = model.new_state();
    std::vector<float> p1;
    sampler.distribution(model.forward(after_prompt, prompt, false), p1);
    const std::vector<std::uint8_t> bucket1 = mass_quarters(p1);
    std::vector<std::vector<std::uint8_t>> bucket2(V);
    std::array<double, 16> expected{};
    for (std::size_t a = 0; a < V; ++a) {
        aff::DecodeState st = after_prompt;
        const std::int32_t one[1] = {std::int32_t(a)};
        std::vector<float> p2;
        sampler.distribution(model.forward(st, one, false), p2);
        bucket2[a] = mass_quarters(p2);
        for (std::size_t b = 0; b < V; ++b) expected[bucket1[a] * 4 + bucket2[a][b]] += double(p1[a]) * p2[b];
    }
    std::array<int, 16> counts{};
    std::size_t drafted = 0, accepted = 0;
    for (int r = 0; r < runs; ++r) {
        aff::CpuSequence seq(model);
        aff::DsparkDrafter dspark(model, seq, 5, 0.0f);
        Lying lying(dspark, V);
        aff::GenerateOptions opt;
        opt.prompt = prompt;
        opt.max_new_tokens = 2;
        opt.sampling = params;
        opt.sampling.seed = std::uint64_t(r) * 7919 + 1;
        const Outcome o = generate_on(seq, opt, lie ? static_cast<aff::Drafter*>(&lying) : &dspark);
        REQUIRE(o.tokens.size() == 2);
        REQUIRE(o.stats.verify_calls == 1);
        drafted += o.stats.drafted_tokens;
        accepted += o.stats.accepted_tokens;
        ++counts[bucket1[std::size_t(o.tokens[0])] * 4 + bucket2[std::size_t(o.tokens[0])][std::size_t(o.tokens[1])]];
    }
    // Both ways through the rule were taken: guesses kept, and rejected ones replaced.
    if (!lie) {
        REQUIRE(accepted > drafted / 10);
        REQUIRE(accepted < drafted);
    }
    double chi = 0;
    for (std::size_t c = 0; c < 16; ++c) {
        const double e = expected[c] * runs;
        REQUIRE(e >= 5);  // the chi-square approximation holds
        chi += (counts[c] - e) * (counts[c] - e) / e;
    }
    return chi;
}
}  // namespace

TEST_CASE("speculative sampling with DSpark drafts leaves the tokens distributed as the target's", "[runtime]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(checkpoint(true), pool);
    // 16 cells, 15 degrees of freedom: P(chi-square > 56.49) = 1e-6 under the hypothesis that
    // the tokens follow the target (from the regularised incomplete gamma function). Fixed
    // seeds: the same value on every run.
    const double critical = 56.49;
    const double honest = dspark_chi_square(*model, false, 2000);
    INFO("chi-square " << honest);
    CHECK(honest < critical);
    // Control: a drafter that reports another distribution than it drew from breaks the
    // output distribution, and the test sees it.
    const double broken = dspark_chi_square(*model, true, 2000);
    INFO("broken drafter's chi-square " << broken);
    CHECK(broken > critical);
}

namespace {
// A CPU runner with a backend-side greedy chain (DsparkRunner::greedy, as the GPU's device
// stages have), computed here from the runner's own per-guess calls: the drafter's use of it
// (the whole chain first, then the cut) must give the sequential loop's proposal exactly.
class ChainRunner final : public aff::test::ForwardingDsparkRunner {
public:
    using ForwardingDsparkRunner::ForwardingDsparkRunner;
    bool greedy(std::int32_t anchor, std::size_t count, std::vector<std::int32_t>& ids,
                std::vector<float>& confidences) override {
        ++calls;
        ids.clear();
        confidences.clear();
        std::int32_t prev = anchor;
        for (std::size_t i = 0; i < count; ++i) {
            confidences.push_back(inner().confidence(i, prev));
            const std::vector<float> row = inner().guess_logits(i, prev);
            prev = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());  // the first of the max
            ids.push_back(prev);
        }
        return true;
    }
    int calls = 0;
};
}  // namespace

TEST_CASE("a runner's greedy chain gives the sequential proposal and runs only at temperature 0", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    const auto prompt = prompt_of(20, 7);
    for (float temperature : {0.0f, 0.9f})
        for (float survival : {0.0f, 0.25f, 0.5f, 2.0f})
            for (std::size_t k : {1, 3, 5}) {
                INFO("temperature " << temperature << ", threshold " << survival << ", k " << k);
                aff::SamplerParams sp;
                sp.temperature = temperature;
                sp.seed = 5;
                aff::CpuSequence plain_seq(*model), chain_seq(*model);
                aff::DsparkDrafter plain(*model, plain_seq, k, survival);
                auto runner = std::make_unique<ChainRunner>(aff::make_cpu_dspark_runner(*model, chain_seq));
                ChainRunner& chain_runner = *runner;
                aff::DsparkDrafter chained(std::move(runner), k, survival);
                plain.start(sp);
                chained.start(sp);
                plain_seq.forward(std::span(prompt).first(19), false);
                chain_seq.forward(std::span(prompt).first(19), false);
                const std::vector<std::int32_t> want = plain.propose(prompt), got = chained.propose(prompt);
                CHECK(got == want);
                CHECK(std::vector<float>(chained.confidences().begin(), chained.confidences().end()) ==
                      std::vector<float>(plain.confidences().begin(), plain.confidences().end()));
                CHECK(chain_runner.calls == (temperature == 0.0f ? 1 : 0));
            }
}

TEST_CASE("the DSpark rings wait for a proposal, and after a long stretch without one are a fresh build's", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    const int W = model->config().sliding_window;
    for (int stretch : {3, W - 1, 2 * W + 5, 5 * W + 3}) {
        INFO("plain steps " << stretch << ", window " << W);
        aff::CpuSequence seq(*model);
        aff::DsparkDrafter dspark(*model, seq, 3, 0.0f);
        aff::SamplerParams greedy;
        greedy.temperature = 0;
        dspark.start(greedy);
        const std::vector<std::int32_t> tokens = prompt_of(7 + stretch + 1, 4);
        seq.forward(std::span(tokens).first(7), false);
        for (int i = 0; i < stretch; ++i) seq.forward(std::span(tokens).subspan(std::size_t(7 + i), 1), false);
        const std::int64_t P = seq.position();
        // Plain steps leave the rings where they were.
        CHECK(dspark.runner().position() < P);
        const std::vector<std::int32_t> guesses = dspark.propose(std::span(tokens).first(std::size_t(P) + 1));
        CHECK(!guesses.empty());
        REQUIRE(dspark.runner().position() == P);
        const aff::DsparkState fresh = fresh_dspark_rings(*model, tokens, P);
        for (std::size_t s = 0; s < 3; ++s) CHECK(dspark.runner().ring(s) == fresh.stages[s].ring);  // bit for bit
    }
}

TEST_CASE("the DSpark drafter stops hearing taps while not listening, and a window heard before a proposal rebuilds its rings", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(checkpoint(false), pool);
    const int W = model->config().sliding_window;
    REQUIRE(W > 2);
    aff::SamplerParams greedy;
    greedy.temperature = 0;
    for (int off : {1, W, 3 * W + 2}) {
        for (int heard : {W, W + 3}) {
            INFO("steps not listening " << off << ", then heard " << heard << ", window " << W);
            const std::vector<std::int32_t> tokens = prompt_of(7 + off + heard + 1, 8);
            // The same positions with listening throughout, for the guesses.
            aff::CpuSequence seq_on(*model);
            aff::DsparkDrafter always(*model, seq_on, 3, 0.0f);
            always.start(greedy);
            seq_on.forward(std::span(tokens).first(7), false);
            for (int i = 0; i < off + heard; ++i) seq_on.forward(std::span(tokens).subspan(std::size_t(7 + i), 1), false);

            aff::CpuSequence seq(*model);
            aff::DsparkDrafter dspark(*model, seq, 3, 0.0f);
            CHECK(dspark.warmup_positions() == std::size_t(W));
            dspark.start(greedy);
            seq.forward(std::span(tokens).first(7), false);
            dspark.set_listening(false);
            for (int i = 0; i < off; ++i) seq.forward(std::span(tokens).subspan(std::size_t(7 + i), 1), false);
            // Nothing heard since: a proposal now has no taps for the positions run, so no guess.
            CHECK(dspark.propose(std::span(tokens).first(std::size_t(seq.position()) + 1)).empty());
            dspark.set_listening(true);
            for (int i = off; i < off + heard; ++i) seq.forward(std::span(tokens).subspan(std::size_t(7 + i), 1), false);
            const std::int64_t P = seq.position();
            const auto context = std::span(tokens).first(std::size_t(P) + 1);
            const std::vector<std::int32_t> guesses = dspark.propose(context);
            CHECK(!guesses.empty());
            CHECK(guesses == always.propose(context));
            REQUIRE(dspark.runner().position() == P);
            const aff::DsparkState fresh = fresh_dspark_rings(*model, tokens, P);
            for (std::size_t s = 0; s < 3; ++s) CHECK(dspark.runner().ring(s) == fresh.stages[s].ring);  // bit for bit
        }
    }
}
