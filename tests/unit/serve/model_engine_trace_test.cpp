// aff-serve's --route-trace through the model engine (random tiny checkpoint, CPU): each
// request is one sequence of the trace, its prompt prefill and its generated tokens decode,
// and after every request the file holds a complete trace of every request so far; with MTP
// drafts (the trained tiny model) its verify calls are draft-verify steps and the rewinds into
// them replay steps, as many as the generation's figures say, and the MTP layer's calls draft
// steps.
#include "libaff/serve/generation.hpp"
#include "libaff/serve/model_engine.hpp"
#include "unit/serve/engine_steps.hpp"
#include "libaff/trace/route_trace.hpp"

#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

namespace serve = aff::serve;
using aff::trace::Phase;

TEST_CASE("the model engine records each request as one sequence of the route trace", "[serve]") {
    aff::test::TempDir dir;
    serve::ModelEngineOptions o;
    o.model_path = AFF_RANDOM_MODEL_DIR;
    o.tokenizer_path = AFF_TOKENIZER_JSON;
    o.threads = 2;
    o.backend.gpus = 0;
    o.prefix_cache_bytes = 0;
    o.route_trace = dir / "serve.aft";
    if (!std::filesystem::exists(o.model_path + "/config.json"))
        throw std::runtime_error(o.model_path + " is missing: run ctest (fixture setup.random_model)");
    auto engine = serve::ModelEngine::load(o);
    const std::vector<std::int32_t> first = {0, 11, 12, 13, 14}, second = {0, 21, 22};
    aff::test::prefill(*engine, first);
    aff::test::decode(*engine, 5);
    engine->end_sequence();
    REQUIRE(aff::trace::read_route_trace(o.route_trace).steps.size() == 3);  // a prompt runs as two calls
    aff::test::prefill(*engine, second);
    aff::test::decode(*engine, 6);
    aff::test::decode(*engine, 7);
    engine->end_sequence();
    const auto t = aff::trace::read_route_trace(o.route_trace);
    REQUIRE(t.header.layers == std::uint32_t(engine->model().config().num_layers));
    REQUIRE(t.steps.size() == 7);
    struct Want {
        std::uint32_t sequence, first_position, tokens;
        Phase phase;
    };
    const Want want[7] = {{0, 0, 4, Phase::prefill}, {0, 4, 1, Phase::prefill}, {0, 5, 1, Phase::decode},
                          {1, 0, 2, Phase::prefill}, {1, 2, 1, Phase::prefill}, {1, 3, 1, Phase::decode},
                          {1, 4, 1, Phase::decode}};
    for (std::size_t s = 0; s < 7; ++s) {
        INFO("step " << s);
        REQUIRE(t.steps[s].n() == want[s].tokens);
        REQUIRE(t.steps[s].layers.size() == t.header.layers);
        for (std::size_t i = 0; i < t.steps[s].n(); ++i) {
            REQUIRE(t.steps[s].tokens[i].sequence == want[s].sequence);
            REQUIRE(t.steps[s].tokens[i].position == want[s].first_position + i);
            REQUIRE(t.steps[s].tokens[i].phase == want[s].phase);
        }
    }
    REQUIRE(t.steps[2].tokens[0].token == 5);
    REQUIRE(t.steps[6].tokens[0].token == 7);
}

TEST_CASE("the model engine's route trace labels verify calls and replays with drafts", "[serve]") {
    // The trained tiny model with its MTP drafter (the server's --draft mtp): a greedy request's
    // trace has one draft-verify step per verify call, of the call's drafted + 1 tokens in all,
    // one replay step per verify call that kept only part of its guesses, and the MTP layer's
    // three draft steps (layer L) per proposal.
    aff::test::TempDir dir;
    serve::ModelEngineOptions o;
    o.model_path = std::string(AFF_TEST_DATA) + "/models/tiny-trained";
    o.threads = 2;
    o.backend.gpus = 0;
    o.route_trace = dir / "drafts.aft";
    o.draft.mode = aff::DraftMode::mtp;
    o.draft.max_tokens = 3;
    auto engine = serve::ModelEngine::load(o);
    REQUIRE(engine->drafter() != nullptr);
    serve::GenerationParams params;
    params.max_tokens = 40;
    params.sampling.temperature = 0;
    const serve::GenerationResult r =
        serve::generate(*engine, engine->tokenize("def fibonacci(n):", true), params, aff::GenerateHooks{});
    REQUIRE(r.verify_calls > 0);
    REQUIRE(r.accepted_tokens < r.drafted_tokens);
    const auto t = aff::trace::read_route_trace(o.route_trace);
    std::size_t verify = 0, verify_tokens = 0, replays = 0, kept_all = 0, drafts = 0;
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
        const Phase p = t.steps[s].tokens.front().phase;
        for (const auto& tok : t.steps[s].tokens) REQUIRE(tok.phase == p);
        if (p == Phase::draft_verify) {
            ++verify;
            verify_tokens += t.steps[s].n();
            if (s + 1 == t.steps.size() || t.steps[s + 1].tokens.front().phase != Phase::replay) ++kept_all;
        }
        if (p == Phase::draft) {
            REQUIRE(t.steps[s].layers == std::vector<std::uint16_t>{std::uint16_t(t.header.layers)});
            ++drafts;
        }
        if (p == Phase::replay) {
            REQUIRE(t.steps[s - 1].tokens.front().phase == Phase::draft_verify);
            REQUIRE(t.steps[s].tokens.front().position == t.steps[s - 1].tokens.front().position);
            ++replays;
        }
    }
    CHECK(verify == r.verify_calls);
    CHECK(verify_tokens == r.drafted_tokens + r.verify_calls);
    CHECK(replays > 0);
    CHECK(replays + kept_all == verify);
    CHECK(drafts == 3 * verify);  // the MTP layer's k = 3 calls a proposal
}
