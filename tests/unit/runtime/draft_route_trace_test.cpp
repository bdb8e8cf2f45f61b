// Tests for route traces of generations with drafts (formats/route-trace.md §5.1, labelled by
// the loop's before_dispatch through route_phase): on the trained tiny model with its MTP
// drafter, greedy output with a recorder is the output without drafts, and the trace read
// back holds exactly the calls the loop made: one prefill step, one decode step of one token
// per plain decode call, one draft-verify step of drafted + 1 tokens per verify call (their
// sum the loop's drafted_tokens + verify_calls), and after each verify call that kept only
// part of its guesses one replay step re-running the call's first accepted + 1 tokens at the
// call's positions; the accepted counts read off the trace add up to the loop's
// accepted_tokens. Before each verify step come the k draft steps of the MTP layer that
// proposed its guesses (layer L alone): the catch-up over the trunk's new positions, ending
// with the verify call's first token one position before it, then one step per further
// guess, each running the guess before it.
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/mtp_drafter.hpp"
#include "libaff/runtime/route_phase.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/trace/route_trace.hpp"

#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace aff;
using trace::Phase;

namespace {

const std::string kTrained = std::string(AFF_TEST_DATA) + "/models/tiny-trained";

struct Run {
    std::vector<std::int32_t> tokens;
    GenerateStats stats;
};

// A greedy generation of `n` tokens as aff-run makes it (no logits asked for), recorded into
// `recorder` when given.
Run generate_greedy(Sequence& seq, std::span<const std::int32_t> prompt, std::size_t n, Drafter* drafter,
                    trace::RouteRecorder* recorder) {
    GenerateOptions opt;
    opt.prompt.assign(prompt.begin(), prompt.end());
    opt.max_new_tokens = n;
    opt.sampling.temperature = 0;
    Run out;
    GenerateHooks h;
    h.on_step = [&](const GenerationStep& s) {
        out.tokens.push_back(s.token);
        return true;
    };
    h.drafter = drafter;
    if (recorder) {
        seq.set_route_observer(recorder);
        h.before_dispatch = [&](const Dispatch& d) { recorder->begin(0, route_phase(d.kind)); };
    }
    out.stats = generate(seq, opt, h);
    return out;
}

}  // namespace

TEST_CASE("route_phase: each kind of call the loop makes has its trace phase", "[runtime]") {
    CHECK(route_phase(Dispatch::Kind::prompt) == Phase::prefill);
    CHECK(route_phase(Dispatch::Kind::decode) == Phase::decode);
    CHECK(route_phase(Dispatch::Kind::verify) == Phase::draft_verify);
    CHECK(route_phase(Dispatch::Kind::replay) == Phase::replay);
}

TEST_CASE("a traced generation with MTP drafts records its verify calls and replays, counts as the loop's", "[runtime]") {
    ThreadPool pool(2);
    auto model = Model::load(kTrained, pool);
    REQUIRE(model->has_mtp());
    const std::vector<std::int32_t> prompt = {0, 1006, 1005, 1007, 1005, 1009, 1006, 1011, 1005, 1013, 1007};
    const std::size_t n = 40;
    CpuSequence plain_seq(*model);
    const Run plain = generate_greedy(plain_seq, prompt, n, nullptr, nullptr);
    REQUIRE(plain.tokens.size() == n);

    for (std::size_t k : {std::size_t(1), std::size_t(3)}) {
        INFO("draft-max " << k);
        test::TempDir dir;
        const std::string path = dir / "d.aft";
        CpuSequence seq(*model);
        MtpDrafter drafter(*model, seq, k);
        trace::RouteRecorder recorder(path, trace::trace_header_for(model->config(), kTrained));
        const Run drafted = generate_greedy(seq, prompt, n, &drafter, &recorder);
        recorder.publish();
        CHECK(drafted.tokens == plain.tokens);
        const GenerateStats& st = drafted.stats;
        REQUIRE(st.verify_calls > 0);
        // Some calls keep every guess and some do not, so both kinds of verify step are seen.
        REQUIRE(st.accepted_tokens > 0);
        REQUIRE(st.accepted_tokens < st.drafted_tokens);

        const trace::RouteTrace t = trace::read_route_trace(path);
        REQUIRE(!t.steps.empty());
        const std::size_t L = std::size_t(model->config().num_layers);
        std::size_t prefill = 0, decode = 0, verify = 0, verify_tokens = 0, replays = 0, accepted = 0, partial = 0;
        std::size_t drafts = 0, drafts_before = 0;  // draft steps in all, and since the last other step
        for (std::size_t s = 0; s < t.steps.size(); ++s) {
            const trace::TraceStep& step = t.steps[s];
            INFO("step " << s);
            const Phase phase = step.tokens.front().phase;
            if (phase == Phase::draft) {
                REQUIRE(step.layers == std::vector<std::uint16_t>{std::uint16_t(L)});
                REQUIRE(step.n() >= 1);
                if (drafts_before > 0) REQUIRE(step.n() == 1);  // a further guess: one token
                ++drafts;
                ++drafts_before;
                for (std::size_t i = 1; i < step.n(); ++i) REQUIRE(step.tokens[i].position == step.tokens[0].position + i);
                continue;
            }
            REQUIRE(step.layers.size() == L);
            // The k draft steps before a verify step proposed its guesses; none come before another step.
            const std::size_t proposed_by = drafts_before;
            drafts_before = 0;
            if (phase == Phase::draft_verify) {
                REQUIRE(proposed_by == k);
                // (MTP position, token) of the catch-up's last token and of each further guess's step:
                // one position before the trunk's, the verify call's tokens in order.
                for (std::size_t j = 0; j < k && j < step.n(); ++j) {
                    const trace::TraceToken& d = t.steps[s - k + j].tokens.back();
                    CHECK(d.token == step.tokens[j].token);
                    CHECK(d.position + 1 == step.tokens[j].position);
                }
            } else {
                REQUIRE(proposed_by == 0);
            }
            for (std::size_t i = 0; i < step.n(); ++i) {
                REQUIRE(step.tokens[i].phase == phase);  // a call is labelled whole
                REQUIRE(step.tokens[i].position == step.tokens.front().position + i);
            }
            switch (phase) {
                case Phase::prefill:
                    REQUIRE(s == 0);
                    REQUIRE(step.n() == prompt.size());
                    ++prefill;
                    break;
                case Phase::decode:
                    REQUIRE(step.n() == 1);
                    ++decode;
                    break;
                case Phase::draft_verify: {
                    REQUIRE(step.n() >= 2);
                    REQUIRE(step.n() <= k + 1);
                    ++verify;
                    verify_tokens += step.n();
                    // A replay right after it: the call kept only its first a guesses.
                    const bool replayed = s + 1 < t.steps.size() && t.steps[s + 1].tokens.front().phase == Phase::replay;
                    if (!replayed) {
                        accepted += step.n() - 1;
                        break;
                    }
                    const trace::TraceStep& r = t.steps[s + 1];
                    REQUIRE(r.n() < step.n());
                    REQUIRE(r.tokens.front().position == step.tokens.front().position);
                    for (std::size_t i = 0; i < r.n(); ++i) REQUIRE(r.tokens[i].token == step.tokens[i].token);
                    // The replay runs what the verify call ran for those tokens: the same routing.
                    for (std::size_t b = 0; b < r.layers.size(); ++b)
                        for (std::size_t i = 0; i < r.n(); ++i) {
                            const auto a = r.selection(b, i, t.header.top_k), v = step.selection(b, i, t.header.top_k);
                            REQUIRE(std::vector<std::uint16_t>(a.begin(), a.end()) == std::vector<std::uint16_t>(v.begin(), v.end()));
                        }
                    accepted += r.n() - 1;
                    ++partial;
                    break;
                }
                case Phase::replay:
                    REQUIRE(s > 0);
                    REQUIRE(t.steps[s - 1].tokens.front().phase == Phase::draft_verify);
                    ++replays;
                    break;
                case Phase::draft: break;  // above
            }
        }
        CHECK(prefill == 1);
        CHECK(verify == st.verify_calls);
        CHECK(verify_tokens == st.drafted_tokens + st.verify_calls);
        CHECK(decode + verify == st.decode_forwards);
        CHECK(replays == partial);
        CHECK(replays > 0);
        CHECK(accepted == st.accepted_tokens);
        CHECK(drafts == k * st.verify_calls);
        CHECK(t.token_steps() == prompt.size() + decode + verify_tokens + [&] {
                  std::size_t r = 0;
                  for (const auto& step : t.steps)
                      if (step.tokens.front().phase == Phase::replay || step.draft()) r += step.n();
                  return r;
              }());
    }
}
