// Tests for libaff/runtime: the generation loop on a tiny fixture (forced tokens, greedy and
// seeded sampling, refusals, a scripted drafter's guesses verified and rewound), the logits
// file and token-list parsing.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/logits_file.hpp"
#include "libaff/runtime/token_list.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
const std::string kTiny = std::string(AFF_TEST_DATA) + "/models/tiny-a";

struct Recorded {
    std::vector<std::int32_t> tokens;
    std::vector<std::int64_t> positions;
    std::vector<std::vector<float>> logits;
};

Recorded run(const aff::Model& model, const aff::GenerateOptions& opt, bool with_logits) {
    Recorded r;
    aff::CpuSequence sequence(model);
    aff::GenerateHooks cb;
    cb.on_step = [&](const aff::GenerationStep& s) {
        r.tokens.push_back(s.token);
        return true;
    };
    if (with_logits)
        cb.on_logits = [&](std::int64_t pos, std::int32_t, std::span<const float> l) {
            r.positions.push_back(pos);
            r.logits.emplace_back(l.begin(), l.end());
        };
    aff::generate(sequence, opt, cb);
    return r;
}
}  // namespace

TEST_CASE("forced tokens give the logits of one prefill over prompt and continuation", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kTiny, pool);
    aff::GenerateOptions opt;
    opt.prompt = {0, 5, 9, 33, 17, 80, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    opt.forced = {42, 7, 100, 3, 250};
    const Recorded r = run(*model, opt, true);
    CHECK(r.tokens == opt.forced);
    REQUIRE(r.logits.size() == opt.prompt.size() + opt.forced.size());
    for (std::size_t i = 0; i < r.positions.size(); ++i) CHECK(r.positions[i] == static_cast<std::int64_t>(i));

    std::vector<std::int32_t> all = opt.prompt;
    all.insert(all.end(), opt.forced.begin(), opt.forced.end());
    aff::DecodeState state = model->new_state();
    const std::vector<float> ref = model->forward(state, all, true);
    const int v = model->config().vocab_size;
    float max_abs = 0, max_diff = 0;
    for (std::size_t i = 0; i < all.size(); ++i)
        for (int j = 0; j < v; ++j) {
            max_abs = std::max(max_abs, std::fabs(ref[i * v + j]));
            max_diff = std::max(max_diff, std::fabs(ref[i * v + j] - r.logits[i][j]));
        }
    CHECK(max_abs > 0.1f);
    CHECK(max_diff <= 1e-4f * max_abs);
}

TEST_CASE("greedy generation follows the argmax and seeded sampling repeats", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kTiny, pool);
    aff::GenerateOptions opt;
    opt.prompt = {0, 11, 22, 33};
    opt.max_new_tokens = 6;
    opt.sampling.temperature = 0;
    const Recorded greedy = run(*model, opt, true);
    REQUIRE(greedy.tokens.size() == 6);
    // Row prompt.size()-1+i predicts generated token i.
    for (std::size_t i = 0; i < greedy.tokens.size(); ++i) {
        const auto& row = greedy.logits[opt.prompt.size() - 1 + i];
        const auto best = std::max_element(row.begin(), row.end()) - row.begin();
        CHECK(greedy.tokens[i] == best);
    }
    opt.sampling.temperature = 1.0f;
    opt.sampling.seed = 7;
    const Recorded a = run(*model, opt, false), b = run(*model, opt, false);
    CHECK(a.tokens == b.tokens);
    CHECK(a.tokens.size() == 6);
}

TEST_CASE("generation refuses tokens outside the vocabulary and an empty prompt", "[runtime]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(kTiny, pool);
    aff::CpuSequence sequence(*model);
    aff::GenerateOptions opt;
    CHECK_THROWS_WITH(aff::generate(sequence, opt, {}), "the prompt is empty");
    opt.prompt = {0, 256};
    CHECK_THROWS_WITH(aff::generate(sequence, opt, {}), "prompt token 256 is outside the model's vocabulary (0..255)");
    opt.prompt = {0};
    opt.forced = {-1};
    CHECK_THROWS_WITH(aff::generate(sequence, opt, {}), "forced token -1 is outside the model's vocabulary (0..255)");
    CHECK(sequence.position() == 0);  // refused before anything ran
}

TEST_CASE("a logits file reads back what was written and rejects damage", "[runtime]") {
    const fs::path dir = fs::temp_directory_path() / ("aff-logits-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "l.bin").string();
    {
        aff::LogitsFileWriter w(path, 3);
        const float a[3] = {1.5f, -2.0f, 0.25f}, b[3] = {0, 1, 2};
        w.add(0, 7, a);
        w.add(1, 9, b);
        w.commit();
    }
    const auto recs = aff::read_logits_file(path);
    REQUIRE(recs.size() == 2);
    CHECK(recs[0].position == 0);
    CHECK(recs[0].token == 7);
    CHECK(recs[0].logits == std::vector<float>{1.5f, -2.0f, 0.25f});
    CHECK(recs[1].token == 9);
    CHECK(fs::file_size(path) == 32 + 2 * (16 + 12));

    fs::resize_file(path, fs::file_size(path) - 4);
    CHECK_THROWS_WITH(aff::read_logits_file(path), Catch::EndsWith("size 84 does not match 2 records of vocab 3"));
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.write("XFF", 3);
    }
    CHECK_THROWS_WITH(aff::read_logits_file(path), Catch::EndsWith("not a logits file (wrong magic)"));
    fs::remove_all(dir);
}

TEST_CASE("token lists take commas and spaces and name a bad item", "[runtime]") {
    CHECK(aff::parse_token_list("0,17, 42\n5") == std::vector<std::int32_t>{0, 17, 42, 5});
    CHECK(aff::parse_token_list("  ").empty());
    CHECK_THROWS_WITH(aff::parse_token_list("1,x2"), "invalid token id 'x2' (expected a non-negative integer)");
    CHECK_THROWS_WITH(aff::parse_token_list("-3"), "invalid token id '-3' (expected a non-negative integer)");
    CHECK_THROWS_WITH(aff::parse_token_list("99999999999"), Catch::Contains("99999999999"));
}

namespace {

// A drafter that knows a plain run's tokens and guesses them, wrongly at every third call's
// second guess and not at all at every fifth call: what the loop does with right, wrong and
// missing guesses, without a draft model.
class ScriptedDrafter final : public aff::Drafter {
public:
    ScriptedDrafter(std::vector<std::int32_t> generated, std::size_t prompt, int vocab)
        : generated_(std::move(generated)), prompt_(prompt), vocab_(vocab) {}
    std::size_t max_tokens() const override { return 3; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override {
        ++calls;
        if (calls % 5 == 0) return {};
        std::vector<std::int32_t> out;
        for (std::size_t i = context.size() - prompt_; i < generated_.size() && out.size() < 4; ++i)
            out.push_back(generated_[i]);  // one more than max_tokens: the loop keeps 3
        if (calls % 3 == 0 && out.size() > 1) out[1] = (out[1] + 1) % vocab_;
        return out;
    }
    void verified(std::size_t proposed, std::size_t accepted) override {
        proposed_total += proposed;
        accepted_total += accepted;
    }
    int calls = 0;
    std::size_t proposed_total = 0, accepted_total = 0;

private:
    std::vector<std::int32_t> generated_;
    std::size_t prompt_;
    int vocab_;
};

struct Run {
    Recorded r;
    aff::GenerateStats stats;
    std::int64_t end_position = 0;
    std::vector<aff::Dispatch> dispatches;
    std::vector<aff::Dispatch> announced;  // as before_dispatch saw them
};

Run run_with(const aff::Model& model, const aff::GenerateOptions& opt, aff::Drafter* drafter) {
    Run out;
    aff::CpuSequence sequence(model);
    aff::GenerateHooks h;
    h.on_step = [&](const aff::GenerationStep& s) {
        out.r.tokens.push_back(s.token);
        return true;
    };
    h.on_logits = [&](std::int64_t pos, std::int32_t, std::span<const float> l) {
        out.r.positions.push_back(pos);
        out.r.logits.emplace_back(l.begin(), l.end());
    };
    h.between_dispatches = [&](const aff::Dispatch& d) { out.dispatches.push_back(d); };
    h.before_dispatch = [&](const aff::Dispatch& d) { out.announced.push_back(d); };
    h.drafter = drafter;
    out.stats = aff::generate(sequence, opt, h);
    out.end_position = sequence.position();
    CHECK(sequence.rewind_depth() == 0);  // the loop gave the depth back
    return out;
}

}  // namespace

TEST_CASE("with a drafter, the loop generates the tokens and logits of a run without one", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kTiny, pool);
    const int V = model->config().vocab_size;
    for (float temperature : {0.0f, 1.0f}) {
        INFO("temperature " << temperature);
        aff::GenerateOptions opt;
        opt.prompt = {0, 11, 22, 33, 44, 55, 66};
        opt.max_new_tokens = 30;
        opt.sampling.temperature = temperature;
        opt.sampling.seed = 5;
        const Run plain = run_with(*model, opt, nullptr);
        REQUIRE(plain.r.tokens.size() == 30);
        CHECK(plain.stats.drafted_tokens == 0);

        ScriptedDrafter drafter(plain.r.tokens, opt.prompt.size(), V);
        const Run drafted = run_with(*model, opt, &drafter);
        CHECK(drafted.r.tokens == plain.r.tokens);
        CHECK(drafted.r.positions == plain.r.positions);
        CHECK(drafted.r.logits == plain.r.logits);  // bit for bit: the CPU forward ignores chunking
        CHECK(drafted.end_position == plain.end_position);
        CHECK(drafted.stats.generated_tokens == 30);
        // Guesses were made, some right and some wrong, and fewer calls ran than tokens.
        CHECK(drafted.stats.drafted_tokens == drafter.proposed_total);
        CHECK(drafted.stats.accepted_tokens == drafter.accepted_total);
        CHECK(drafted.stats.accepted_tokens > 0);
        CHECK(drafted.stats.accepted_tokens < drafted.stats.drafted_tokens);
        CHECK(drafted.stats.decode_forwards + drafted.stats.accepted_tokens == plain.stats.decode_forwards);
        const auto verifies = std::count_if(drafted.dispatches.begin(), drafted.dispatches.end(),
                                            [](const aff::Dispatch& d) { return d.kind == aff::Dispatch::Kind::verify; });
        CHECK(verifies > 0);
        CHECK(drafted.dispatches.front().kind == aff::Dispatch::Kind::prompt);
        CHECK(drafted.dispatches.front().tokens == opt.prompt.size());
        CHECK(plain.dispatches.size() == plain.stats.decode_forwards + 1);
        // before_dispatch announced each call before it ran, as between_dispatches then saw it,
        // and a replay right after each verify call that kept only part of its guesses: at the
        // call's position, of its first token and the guesses kept.
        std::size_t next = 0, replays = 0, partial = 0;
        for (std::size_t i = 0; i < drafted.announced.size(); ++i) {
            const aff::Dispatch& a = drafted.announced[i];
            INFO("announced " << i);
            if (a.kind == aff::Dispatch::Kind::replay) {
                ++replays;
                REQUIRE(next > 0);
                const aff::Dispatch& v = drafted.dispatches[next - 1];
                REQUIRE(v.kind == aff::Dispatch::Kind::verify);
                CHECK(a.position == v.position);
                CHECK(a.tokens >= 1);
                CHECK(a.tokens < v.tokens);
                continue;
            }
            REQUIRE(next < drafted.dispatches.size());
            const aff::Dispatch& d = drafted.dispatches[next++];
            CHECK((a.kind == d.kind && a.position == d.position && a.tokens == d.tokens && a.seconds == 0));
        }
        CHECK(next == drafted.dispatches.size());
        for (std::size_t i = 0; i < drafted.dispatches.size(); ++i) {
            const aff::Dispatch& d = drafted.dispatches[i];
            // The next call (or the end) is not where this one ended: it was rewound.
            const std::int64_t after = i + 1 < drafted.dispatches.size() ? drafted.dispatches[i + 1].position : drafted.end_position;
            if (d.kind == aff::Dispatch::Kind::verify && after != d.position + std::int64_t(d.tokens)) ++partial;
        }
        CHECK(replays > 0);
        CHECK(replays == partial);
        CHECK(plain.announced.size() == plain.dispatches.size());

        // An end token (possibly among accepted guesses, the sequence then past it): the loop
        // stops there and leaves the sequence where a run without a drafter does.
        const std::int32_t end = plain.r.tokens[17];
        opt.is_end_token = [end](std::int32_t t) { return t == end; };
        const Run plain_end = run_with(*model, opt, nullptr);
        ScriptedDrafter drafter2(plain.r.tokens, opt.prompt.size(), V);
        const Run drafted_end = run_with(*model, opt, &drafter2);
        CHECK(plain_end.stats.ended_by_end_token);
        CHECK(drafted_end.r.tokens == plain_end.r.tokens);
        CHECK(drafted_end.r.logits == plain_end.r.logits);
        CHECK(drafted_end.end_position == plain_end.end_position);
    }
}

namespace {

// The CPU sequence behind a wrapper that counts which call the loop makes: forward (logits)
// or forward_ids (picks), and how many of the picks' calls asked for every row.
class CountingSequence final : public aff::Sequence {
public:
    explicit CountingSequence(const aff::Model& m) : inner_(m) {}
    std::string describe() const override { return inner_.describe(); }
    std::size_t vocab_size() const override { return inner_.vocab_size(); }
    std::int64_t position() const override { return inner_.position(); }
    void reset() override { inner_.reset(); }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        ++logits_calls;
        return inner_.forward(tokens, all_logits);
    }
    std::vector<std::int32_t> forward_ids(std::span<const std::int32_t> tokens, bool all_rows, std::size_t candidates,
                                          const aff::RowSampling* sampling = nullptr) override {
        ++picks_calls;
        if (all_rows) ++all_row_picks;
        if (sampling) ++sampled_calls;
        if (sampling && sampling->draft) ++drawn_verifies;
        // The depth a call runs under: what the sequence keeps to rewind it.
        (tokens.size() > 1 && all_rows ? verify_depths : plain_depths).push_back(inner_.rewind_depth());
        CHECK(candidates == inner_.vocab_size());
        return inner_.forward_ids(tokens, all_rows, candidates, sampling);
    }
    void set_rewind_depth(std::size_t tokens) override { inner_.set_rewind_depth(tokens); }
    std::size_t rewind_depth() const override { return inner_.rewind_depth(); }
    std::int64_t rewind_floor() const override { return inner_.rewind_floor(); }
    std::size_t logits_calls = 0, picks_calls = 0, all_row_picks = 0, sampled_calls = 0, drawn_verifies = 0;
    std::vector<std::size_t> plain_depths, verify_depths;

private:
    void rewind_to(std::int64_t position) override { inner_.rewind(position); }
    aff::CpuSequence inner_;
};

}  // namespace

TEST_CASE("greedy generation that needs no logits runs on picks alone, drafted or not, with the same tokens",
          "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kTiny, pool);
    const int V = model->config().vocab_size;
    aff::GenerateOptions opt;
    opt.prompt = {0, 11, 22, 33, 44, 55, 66};
    opt.max_new_tokens = 30;
    opt.sampling.temperature = 0;
    const Run with_logits = run_with(*model, opt, nullptr);  // an on_logits hook: the logits path
    REQUIRE(with_logits.r.tokens.size() == 30);

    std::size_t last_sampled_calls = 0, last_drawn_verifies = 0;
    auto generate_counted = [&](aff::Drafter* drafter, aff::GenerateOptions o) {
        CountingSequence seq(*model);
        std::vector<std::int32_t> tokens;
        aff::GenerateHooks h;
        h.on_step = [&](const aff::GenerationStep& s) {
            tokens.push_back(s.token);
            return true;
        };
        h.drafter = drafter;
        const aff::GenerateStats stats = aff::generate(seq, o, h);
        // The logits path runs the last token too (its logits are asked for); nothing else differs.
        CHECK(seq.position() == with_logits.end_position - 1);
        // Only verify calls are kept to rewind: plain steps (and the prompt) run at the
        // sequence's own depth, 0, and take no undo record.
        CHECK(std::all_of(seq.plain_depths.begin(), seq.plain_depths.end(), [](std::size_t d) { return d == 0; }));
        if (drafter)
            CHECK(std::all_of(seq.verify_depths.begin(), seq.verify_depths.end(),
                              [&](std::size_t d) { return d == drafter->max_tokens(); }));
        CHECK(seq.rewind_depth() == 0);
        last_sampled_calls = seq.sampled_calls;
        last_drawn_verifies = seq.drawn_verifies;
        return std::make_tuple(tokens, stats, seq.logits_calls, seq.picks_calls, seq.all_row_picks);
    };
    SECTION("plain steps") {
        const auto [tokens, stats, logits_calls, picks_calls, all_rows] = generate_counted(nullptr, opt);
        CHECK(tokens == with_logits.r.tokens);
        CHECK(logits_calls == 0);
        CHECK(picks_calls == stats.decode_forwards + 1);  // the prompt and every step
        CHECK(all_rows == 0);
    }
    SECTION("drafted: the verify calls' guesses checked against their rows' picks") {
        ScriptedDrafter drafter(with_logits.r.tokens, opt.prompt.size(), V);
        const auto [tokens, stats, logits_calls, picks_calls, all_rows] = generate_counted(&drafter, opt);
        CHECK(tokens == with_logits.r.tokens);
        CHECK(logits_calls == 0);  // the rewinds' replays run through the CPU sequence's own log
        CHECK(stats.accepted_tokens > 0);
        CHECK(stats.accepted_tokens < stats.drafted_tokens);
        CHECK(all_rows == stats.verify_calls);
        CHECK(picks_calls == stats.decode_forwards + 1);
    }
    SECTION("anything that needs the logits keeps the logits path") {
        aff::GenerateOptions o = opt;
        o.logprobs = 0;
        const auto [tokens, stats, logits_calls, picks_calls, all_rows] = generate_counted(nullptr, o);
        CHECK(tokens == with_logits.r.tokens);
        CHECK(picks_calls == 0);
        CHECK(logits_calls == stats.decode_forwards + 1);
        // A filter beside the temperature needs the sorted order: the logits path.
        aff::GenerateOptions filtered = opt;
        filtered.sampling.temperature = 0.5f;
        filtered.sampling.top_k = 5;
        CHECK(std::get<3>(generate_counted(nullptr, filtered)) == 0);
    }
    SECTION("sampled with the temperature alone: drawn picks, the same tokens with plain guesses or none") {
        aff::GenerateOptions o = opt;
        o.sampling.temperature = 0.8f;
        o.sampling.seed = 11;
        const auto [plain, plain_stats, logits_calls, picks_calls, all_rows] = generate_counted(nullptr, o);
        CHECK(logits_calls == 0);
        CHECK(picks_calls == plain_stats.decode_forwards + 1);
        CHECK(last_sampled_calls == picks_calls);
        CHECK(plain != with_logits.r.tokens);  // it samples
        // Plain guesses (no distribution) are kept only where a row's own draw is the guess;
        // the draws go by position, so the tokens are the run's without a drafter.
        ScriptedDrafter drafter(plain, o.prompt.size(), V);
        const auto [drafted, stats, d_logits, d_picks, d_all_rows] = generate_counted(&drafter, o);
        CHECK(drafted == plain);
        CHECK(d_logits == 0);
        CHECK(stats.accepted_tokens > 0);
        CHECK(stats.accepted_tokens < stats.drafted_tokens);
        CHECK(d_all_rows == stats.verify_calls);
        CHECK(last_drawn_verifies == 0);  // plain guesses: no distribution to verify against
        // Another seed, other tokens.
        o.sampling.seed = 12;
        CHECK(std::get<0>(generate_counted(nullptr, o)) != plain);
    }
}
