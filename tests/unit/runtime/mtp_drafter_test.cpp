// Tests for speculative decoding with the MTP layer's drafts (runtime/mtp_drafter.hpp) and the
// loop's speculative acceptance (generate.hpp, Sampler::speculative): greedy output with drafts
// is the output without, token and logit bit for bit, on every fixture with an MTP layer; the
// drafter's own state after a generation is a fresh MTP run's over the same positions; a runner
// with a backend-side greedy chain (MtpRunner::greedy_chain, the GPU's device path) leaves the
// drafter's own chain's tokens and state exactly, and is asked only at temperature 0; and the
// stochastic path's tokens are distributed as the target's (a chi-square test at a stated
// false-alarm rate, deterministic seeds), with a control showing the test sees a wrong rule.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/cpu_mtp_runner.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/draft_sampling.hpp"
#include "libaff/runtime/mtp_drafter.hpp"
#include "common/forwarding_mtp_runner.hpp"
#include "common/tempered_draw.hpp"

#include "unit/runtime/generate_outcome.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {
const std::string kModels = std::string(AFF_TEST_DATA) + "/models";

using aff::test::generate_on;
using aff::test::Outcome;

std::vector<std::int32_t> prompt_of(int n, int salt, int vocab) {
    std::vector<std::int32_t> t{0};
    for (int i = 1; i < n; ++i) t.push_back(2 + (i * 37 + i * i * 11 + salt * 101) % (vocab - 2));
    return t;
}
}  // namespace

TEST_CASE("greedy output with MTP drafts is the output without, on every fixture with an MTP layer", "[runtime]") {
    aff::ThreadPool pool(2);
    // (tiny-trained.aff, a main container, keeps no MTP stages: they go to the draft container.)
    for (const char* name : {"tiny-a-fp8", "tiny-trained"}) {
        INFO(name);
        auto model = aff::Model::load(kModels + "/" + name, pool);
        REQUIRE(model->has_mtp());
        const int V = model->config().vocab_size;
        std::size_t accepted = 0;
        for (int salt = 0; salt < 3; ++salt) {
            INFO("prompt " << salt);
            aff::GenerateOptions opt;
            opt.prompt = prompt_of(9 + 7 * salt, salt, V);
            opt.max_new_tokens = 40;
            opt.sampling.temperature = 0;
            aff::CpuSequence plain_seq(*model);
            const Outcome plain = generate_on(plain_seq, opt, nullptr);
            REQUIRE(plain.tokens.size() == 40);
            for (std::size_t k : {std::size_t(1), std::size_t(3), std::size_t(5)}) {
                INFO("draft-max " << k);
                aff::CpuSequence seq(*model);
                aff::MtpDrafter drafter(*model, seq, k);
                const Outcome drafted = generate_on(seq, opt, &drafter);
                CHECK(drafted.tokens == plain.tokens);
                CHECK(drafted.logits == plain.logits);  // bit for bit
                CHECK(drafted.end_position == plain.end_position);
                CHECK(seq.rewind_depth() == 0);
                // Every verify call proposed at most k; the statistics add up.
                const aff::GenerateStats& s = drafted.stats;
                CHECK(s.verify_calls > 0);
                REQUIRE(s.drafted_at.size() <= k);
                REQUIRE(s.accepted_at.size() == s.drafted_at.size());
                std::size_t drafted_sum = 0, accepted_sum = 0;
                for (std::size_t i = 0; i < s.drafted_at.size(); ++i) {
                    drafted_sum += s.drafted_at[i];
                    accepted_sum += s.accepted_at[i];
                    CHECK(s.accepted_at[i] <= s.drafted_at[i]);
                    if (i > 0) CHECK(s.accepted_at[i] <= s.accepted_at[i - 1]);
                }
                CHECK(drafted_sum == s.drafted_tokens);
                CHECK(accepted_sum == s.accepted_tokens);
                CHECK(s.drafted_at[0] == s.verify_calls);
                CHECK(s.decode_forwards + s.accepted_tokens == plain.stats.decode_forwards);
                accepted += s.accepted_tokens;
            }
        }
        // The trained model's MTP layer is right often; the random fixture's is not asked to be.
        if (std::string(name) != "tiny-a-fp8") CHECK(accepted > 60);
    }
}

TEST_CASE("the MTP drafter's state after a generation is a fresh MTP run's over the same positions", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kModels + "/tiny-trained", pool);
    const int V = model->config().vocab_size;
    const std::size_t row = std::size_t(model->config().hc_mult) * model->config().hidden_size;
    // A prompt shorter than the MTP layer's window (64), and one longer: the drafter keeps
    // only the last window of trunk streams and rebuilds its ring from them.
    for (auto [temperature, prompt] : {std::pair{0.0f, 20}, std::pair{0.9f, 20}, std::pair{0.0f, 150}}) {
        INFO("temperature " << temperature << ", prompt " << prompt);
        aff::GenerateOptions opt;
        opt.prompt = prompt_of(prompt, 4, V);
        opt.max_new_tokens = 50;
        opt.sampling.temperature = temperature;
        opt.sampling.seed = 11;
        aff::CpuSequence seq(*model);
        aff::MtpDrafter drafter(*model, seq, 4);
        const Outcome run = generate_on(seq, opt, &drafter);
        // Rejections happened, so the drafter's chained steps had to be undone.
        REQUIRE(run.stats.accepted_tokens < run.stats.drafted_tokens);
        REQUIRE(run.stats.accepted_tokens > 0);

        std::vector<std::int32_t> all = opt.prompt;
        all.insert(all.end(), run.tokens.begin(), run.tokens.end());
        const std::int64_t P = drafter.position();
        REQUIRE(P > std::int64_t(opt.prompt.size()));
        REQUIRE(P < std::int64_t(all.size()));
        // Fresh: the trunk over positions 0..P-1, the MTP layer over (H[q], token q+1).
        aff::DecodeState fresh = model->new_state();
        std::vector<float> streams;
        model->forward(fresh, std::span(all).first(std::size_t(P)), false, &streams);
        REQUIRE(streams.size() == std::size_t(P) * row);
        model->mtp_forward(fresh, streams, std::span(all).subspan(1, std::size_t(P)), false);
        CHECK(fresh.mtp_position == P);
        CHECK(drafter.ring() == fresh.mtp[0].ring);  // bit for bit
    }
}

TEST_CASE("the MTP drafter refuses a model without an MTP layer and a draft length of 0", "[runtime]") {
    aff::ThreadPool pool(1);
    auto none = aff::Model::load(kModels + "/tiny-a", pool);
    aff::CpuSequence seq(*none);
    CHECK_THROWS_WITH(aff::MtpDrafter(*none, seq, 3), "the model has no MTP layer to draft with");
    auto with = aff::Model::load(kModels + "/tiny-a-fp8", pool);
    aff::CpuSequence seq2(*with);
    CHECK_THROWS_WITH(aff::MtpDrafter(*with, seq2, 0), "the MTP drafter needs at least one draft token");
}

namespace {
// A sequence over a vocabulary of 6 whose logits depend only on the position: the target
// distribution of every generated token is known exactly, and rewinding is free.
constexpr int kVocab = 6;
class FixedLogitsSequence final : public aff::Sequence {
public:
    std::string describe() const override { return "fixed logits"; }
    std::size_t vocab_size() const override { return kVocab; }
    std::int64_t position() const override { return position_; }
    void reset() override { position_ = 0; }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        std::vector<float> out;
        for (std::size_t i = all_logits ? 0 : tokens.size() - 1; i < tokens.size(); ++i) {
            const auto row = logits_at(position_ + std::int64_t(i));
            out.insert(out.end(), row.begin(), row.end());
        }
        position_ += std::int64_t(tokens.size());
        return out;
    }
    void set_rewind_depth(std::size_t tokens) override { depth_ = tokens; }
    std::size_t rewind_depth() const override { return depth_; }
    std::int64_t rewind_floor() const override { return std::max<std::int64_t>(0, position_ - std::int64_t(depth_)); }
    // Logits of position p (predicting p + 1): a different shape at each position.
    static std::array<float, kVocab> logits_at(std::int64_t p) {
        std::array<float, kVocab> l{};
        for (int v = 0; v < kVocab; ++v) l[v] = std::log(float(1 + (v * (p + 2) + p) % 5) + 0.5f * v);
        return l;
    }

private:
    void rewind_to(std::int64_t p) override { position_ = p; }
    std::int64_t position_ = 0;
    std::size_t depth_ = 0;
};

// Two guesses drawn from fixed draft distributions that differ from the target's, so both
// acceptance and the residual draw are exercised. With `lie`, it reports a distribution
// other than the one it drew from (a broken drafter: the test must see the damage).
class FixedDrafter final : public aff::Drafter {
public:
    explicit FixedDrafter(std::uint64_t seed, bool lie = false) : rng_(seed), lie_(lie) {
        q_ = {0.40f, 0.05f, 0.05f, 0.30f, 0.15f, 0.05f, 0.10f, 0.10f, 0.50f, 0.10f, 0.10f, 0.10f};
        told_ = {1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6,
                 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6};
    }
    std::size_t max_tokens() const override { return 2; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t>) override {
        std::vector<std::int32_t> out;
        for (int j = 0; j < 2; ++j) {
            std::discrete_distribution<int> d(q_.begin() + j * kVocab, q_.begin() + (j + 1) * kVocab);
            out.push_back(d(rng_));
        }
        return out;
    }
    std::span<const float> draft_distribution(std::size_t i) const override {
        return std::span<const float>(lie_ ? told_ : q_).subspan(i * kVocab, kVocab);
    }

private:
    std::mt19937_64 rng_;
    bool lie_;
    std::vector<float> q_, told_;
};

// Pearson's chi-square of the joint counts of generated tokens 2 and 3 (both chosen by
// speculative sampling) against the product of the target's distributions there.
// logits_path: a top-k that keeps every id, so the loop samples from the logits on the host
// (Sampler::speculative) instead of through forward_ids' drawn picks (sampled_pick.hpp).
double joint_chi_square(bool lie, bool logits_path) {
    const int runs = 20000;
    std::array<int, kVocab * kVocab> counts{};
    for (int r = 0; r < runs; ++r) {
        FixedLogitsSequence seq;
        FixedDrafter drafter(1000003ull * r + 17, lie);
        aff::GenerateOptions opt;
        opt.prompt = {0};
        opt.max_new_tokens = 3;
        opt.sampling.seed = std::uint64_t(r);
        if (logits_path) opt.sampling.top_k = kVocab;
        std::vector<std::int32_t> tokens;
        aff::GenerateHooks h;
        h.on_step = [&](const aff::GenerationStep& s) {
            tokens.push_back(s.token);
            return true;
        };
        h.drafter = &drafter;
        aff::generate(seq, opt, h);
        REQUIRE(tokens.size() == 3);
        ++counts[std::size_t(tokens[1] * kVocab + tokens[2])];
    }
    // Token 2 is predicted at position 1 (the prompt's one token is position 0), token 3 at 2.
    auto probabilities = [](std::int64_t p) {
        const auto l = FixedLogitsSequence::logits_at(p);
        std::array<double, kVocab> q{};
        double sum = 0;
        for (int v = 0; v < kVocab; ++v) sum += q[v] = std::exp(double(l[v]));
        for (double& x : q) x /= sum;
        return q;
    };
    const auto p2 = probabilities(1), p3 = probabilities(2);
    double chi = 0;
    for (int a = 0; a < kVocab; ++a)
        for (int b = 0; b < kVocab; ++b) {
            const double expected = runs * p2[a] * p3[b];
            REQUIRE(expected >= 5);  // the chi-square approximation holds
            const double d = counts[std::size_t(a * kVocab + b)] - expected;
            chi += d * d / expected;
        }
    return chi;
}
}  // namespace

TEST_CASE("speculative sampling leaves the tokens distributed as the target's", "[runtime]") {
    // 36 cells, 35 degrees of freedom: P(chi-square > 89.95) = 1e-6 under the hypothesis that
    // the tokens follow the target (the quantile computed from the regularised incomplete
    // gamma function). The seeds are fixed, so the test gives the same value on every run.
    // Both ways the loop accepts: drawn picks (the temperature alone) and the logits path.
    const double critical = 89.95;
    for (const bool logits_path : {false, true}) {
        INFO((logits_path ? "logits path" : "drawn picks"));
        const double honest = joint_chi_square(false, logits_path);
        INFO("chi-square " << honest);
        CHECK(honest < critical);
        // Control: a drafter that reports a distribution other than the one it drew from breaks
        // the output distribution, and the test sees it.
        const double broken = joint_chi_square(true, logits_path);
        INFO("broken drafter's chi-square " << broken);
        CHECK(broken > 10 * critical);
    }
}

TEST_CASE("speculative acceptance keeps a guess the target is sure of and never returns a rejected one", "[runtime]") {
    aff::SamplerParams params;
    params.seed = 3;
    aff::Sampler s(params);
    // Target certain of token 2 (others at -inf probability): accepted whatever q says.
    const std::vector<float> sure = {-1e30f, -1e30f, 0.0f, -1e30f};
    const std::vector<float> q = {0.25f, 0.25f, 0.25f, 0.25f};
    for (int i = 0; i < 50; ++i) CHECK(s.speculative(sure, 2, q) == 2);
    // Target never gives token 0: a guess of 0 is always rejected, and the residual draw
    // is one of the others in proportion to max(0, p - q).
    const std::vector<float> no_zero = {-1e30f, std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    const std::vector<float> q0 = {0.7f, 0.1f, 0.1f, 0.1f};
    std::array<int, 4> h{};
    for (int i = 0; i < 4000; ++i) ++h[std::size_t(s.speculative(no_zero, 0, q0))];
    CHECK(h[0] == 0);
    // residual 0.4 : 0.2 : 0.1 over tokens 1..3
    CHECK(double(h[1]) / 4000 == Approx(4.0 / 7).margin(0.03));
    CHECK(double(h[3]) / 4000 == Approx(1.0 / 7).margin(0.03));
    // A guess its own distribution gives no mass to is a drafter's bug.
    const std::vector<float> q_without = {0.0f, 0.5f, 0.5f, 0.0f};
    CHECK_THROWS_AS(s.speculative(no_zero, 0, q_without), aff::Error);
}

namespace {
// A CPU runner with a backend-side greedy chain (MtpRunner::greedy_chain, as the GPU's), written
// from the runner's own calls as its contract says: the drafter's use of it must leave the same
// proposals, tokens and MTP state as its own chained loop.
class ChainRunner final : public aff::test::ForwardingMtpRunner {
public:
    ChainRunner(const aff::Model& model, aff::CpuSequence& trunk)
        : ForwardingMtpRunner(std::make_unique<aff::CpuMtpRunner>(model, trunk)) {}
    bool greedy_chain(std::span<const std::int32_t> next, std::size_t k, std::vector<std::int32_t>& guesses) override {
        ++calls;
        auto best = [](const std::vector<float>& l) {
            return std::int32_t(std::max_element(l.begin(), l.end()) - l.begin());  // the first of the max
        };
        guesses = {best(inner().run(next))};
        const std::int64_t after = inner().position();
        if (k > 1) {
            inner().save_ring();
            while (guesses.size() < k) guesses.push_back(best(inner().chain(guesses.back())));
            inner().restore_ring(after);
        }
        return true;
    }
    int calls = 0;
};
}  // namespace

TEST_CASE("a runner's greedy chain gives the drafter's own chain and runs only at temperature 0", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kModels + "/tiny-trained", pool);
    const int V = model->config().vocab_size;
    for (float temperature : {0.0f, 0.9f})
        for (std::size_t k : {1, 3, 5}) {
            INFO("temperature " << temperature << ", k " << k);
            aff::GenerateOptions opt;
            opt.prompt = prompt_of(12, 3, V);
            opt.max_new_tokens = 24;
            opt.sampling.temperature = temperature;
            opt.sampling.seed = 9;
            aff::CpuSequence plain_seq(*model), chain_seq(*model);
            aff::MtpDrafter plain(*model, plain_seq, k);
            auto runner = std::make_unique<ChainRunner>(*model, chain_seq);
            ChainRunner& chain_runner = *runner;
            aff::MtpDrafter chained(std::move(runner), k);
            const Outcome want = generate_on(plain_seq, opt, &plain), got = generate_on(chain_seq, opt, &chained);
            CHECK(got.tokens == want.tokens);
            CHECK(got.stats.drafted_tokens == want.stats.drafted_tokens);
            CHECK(got.stats.accepted_tokens == want.stats.accepted_tokens);
            CHECK(chained.position() == plain.position());
            CHECK(chained.ring() == plain.ring());
            if (temperature == 0.0f)
                CHECK(chain_runner.calls > 0);
            else
                CHECK(chain_runner.calls == 0);
        }
}

namespace {
// A CPU runner with a backend-side sampled chain (MtpRunner::sampled_chain, as the GPU's),
// written from the runner's own calls and the host's account of the draw: the drafter must
// hand it its own sampler's draws and report the q rows it returns.
class SampledChainRunner final : public aff::test::ForwardingMtpRunner {
public:
    SampledChainRunner(const aff::Model& model, aff::CpuSequence& trunk)
        : ForwardingMtpRunner(std::make_unique<aff::CpuMtpRunner>(model, trunk)) {}
    bool sampled_chain(std::span<const std::int32_t> next, std::size_t k, float temperature,
                       std::span<const double> uniforms, std::vector<std::int32_t>& guesses,
                       std::vector<float>* q_out) override {
        std::vector<float>& q = *q_out;  // the drafter hands its own rows: this runner keeps none
        draws.insert(draws.end(), uniforms.begin(), uniforms.end());
        temperatures.push_back(temperature);
        guesses.clear();
        q.clear();
        auto draw = [&](const std::vector<float>& logits) {
            const std::vector<double> row = aff::test::tempered_softmax(logits, temperature);
            guesses.push_back(aff::test::tempered_draw(row, uniforms[guesses.size()]));
            q.insert(q.end(), row.begin(), row.end());
        };
        draw(inner().run(next));
        const std::int64_t after = inner().position();
        if (k > 1) {
            inner().save_ring();
            while (guesses.size() < k) draw(inner().chain(guesses.back()));
            inner().restore_ring(after);
        }
        last_q = q;
        last_guesses = guesses;
        return true;
    }
    std::vector<double> draws;
    std::vector<float> temperatures, last_q;
    std::vector<std::int32_t> last_guesses;
};
}  // namespace

TEST_CASE("a runner's sampled chain gets the drafter's own draws and its q rows are what the drafter reports",
          "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kModels + "/tiny-trained", pool);
    const std::size_t V = std::size_t(model->config().vocab_size);
    for (std::size_t k : {1, 3}) {
        INFO("k " << k);
        aff::CpuSequence seq(*model);
        auto runner = std::make_unique<SampledChainRunner>(*model, seq);
        SampledChainRunner& r = *runner;
        aff::MtpDrafter drafter(std::move(runner), k);
        aff::SamplerParams params;
        params.temperature = 0.8f;
        params.top_k = 40;  // the device-style chain ignores the filters: q is the tempered softmax
        params.seed = 21;
        aff::GenerateOptions opt;
        opt.prompt = prompt_of(12, 3, int(V));
        opt.max_new_tokens = 24;
        opt.sampling = params;
        const Outcome got = generate_on(seq, opt, &drafter);
        CHECK(got.tokens.size() == 24);
        CHECK(got.stats.drafted_tokens > 0);
        REQUIRE(!r.temperatures.empty());
        CHECK(std::all_of(r.temperatures.begin(), r.temperatures.end(), [](float t) { return t == 0.8f; }));
        // The draws are the drafter's own sampler's, in order: k a proposal.
        CHECK(r.draws.size() == k * r.temperatures.size());
        std::optional<aff::Sampler> own = aff::draft_sampler(params);
        REQUIRE(own);
        std::size_t differ = 0;
        for (double u : r.draws) differ += u != own->uniform();
        CHECK(differ == 0);
        // The last proposal's distributions, as the drafter still reports them: the runner's q rows.
        REQUIRE(r.last_q.size() == k * V);
        for (std::size_t j = 0; j < r.last_guesses.size(); ++j) {
            const std::span<const float> q = drafter.draft_distribution(j);
            REQUIRE(q.size() == V);
            CHECK(std::equal(q.begin(), q.end(), r.last_q.begin() + std::ptrdiff_t(j * V)));
            CHECK(q[std::size_t(r.last_guesses[j])] > 0.0f);
        }
    }
}
