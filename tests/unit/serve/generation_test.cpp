// Tests for libaff/serve/generation (the runtime's loop driven by the scripted test engine):
// stop strings never leak, the budget is exact, cancellation costs at most one token, and a
// seeded generation repeats. Also the test engine's own chat parser.
#include "libaff/serve/generation.hpp"
#include "libaff/serve/test_engine.hpp"

#include <catch2/catch.hpp>

using namespace aff::serve;
using aff::FinishReason;
using aff::GenerateHooks;
using aff::GenerationStep;
using aff::StepLogprob;

namespace {
std::vector<std::int32_t> chat(TestEngine& e, const std::string& user, bool thinking = false,
                               nlohmann::ordered_json tools = nlohmann::ordered_json::array()) {
    ChatPrompt p;
    p.messages.push_back({"user", user, "", {}, "", ""});
    p.thinking = thinking;
    p.tools = std::move(tools);
    return e.render_chat(p);
}
}  // namespace

TEST_CASE("a generation ends at the end token with the scripted text", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 1000;
    const auto r = generate(e, chat(e, "hello"), p, {});
    CHECK(r.text == "You said: hello");
    CHECK(r.finish == FinishReason::stop);
    CHECK(r.completion_tokens == r.text.size() + 1);  // + end token
}

TEST_CASE("the token budget is exact and reported as length", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 4;
    const auto r = generate(e, chat(e, "hello"), p, {});
    CHECK(r.text == "You ");
    CHECK(r.completion_tokens == 4);
    CHECK(r.finish == FinishReason::length);
}

TEST_CASE("a stop string ends the generation and is cut from the text", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 100;
    p.stop = {" 4 "};
    const auto r = generate(e, chat(e, "count"), p, {});
    CHECK(r.text == "1 2 3");
    CHECK(r.finish == FinishReason::stop);
}

TEST_CASE("cancellation is seen before the next decode step", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 1000;
    int steps = 0;
    bool gone = false;
    GenerateHooks h;
    h.on_step = [&](const GenerationStep&) {
        if (++steps == 5) gone = true;
        return true;
    };
    h.cancelled = [&] { return gone; };
    const auto r = generate(e, chat(e, "count"), p, h);
    CHECK(r.finish == FinishReason::cancelled);
    CHECK(r.completion_tokens == 5);
    // and an on_step that says stop stops at that very token
    steps = 0;
    gone = false;
    h.on_step = [&](const GenerationStep&) { return ++steps < 3; };
    CHECK(generate(e, chat(e, "count"), p, h).completion_tokens == 3);
}

TEST_CASE("sampling is seeded: same seed same text, another seed other text", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 100;
    auto run = [&](std::uint64_t seed) {
        p.sampling.seed = seed;
        return generate(e, chat(e, "random"), p, {}).text;
    };
    const std::string a = run(1);
    CHECK(a.size() == 24);
    CHECK(a == run(1));
    CHECK(a != run(2));
}

TEST_CASE("logprobs come with each step when asked", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 3;
    p.logprobs = 2;
    std::vector<StepLogprob> seen;
    GenerateHooks h;
    h.on_step = [&](const GenerationStep& s) {
        if (s.logprob) seen.push_back(*s.logprob);
        return true;
    };
    generate(e, chat(e, "hello"), p, h);
    REQUIRE(seen.size() == 3);
    CHECK(seen[0].token == 'Y' + 2);
    CHECK(seen[0].logprob == Approx(0.0).margin(1e-6));
    REQUIRE(seen[0].top.size() == 2);
    CHECK(seen[0].top[0].token == 'Y' + 2);
    CHECK(seen[0].top[1].logprob == Approx(-30.0).margin(1e-3));
}

TEST_CASE("the test engine's replies parse into reasoning, content and a tool call", "[serve]") {
    TestEngine e;
    GenerationParams p;
    p.max_tokens = 1000;
    const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "get_weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    ChatPrompt prompt;
    prompt.messages.push_back({"user", "Paris", "", {}, "", ""});
    prompt.thinking = true;
    prompt.tools = tools;
    auto parser = e.chat_parser(prompt);
    std::vector<ChatEvent> events;
    GenerateHooks h;
    // Feed one byte at a time so every hold-back path runs.
    h.on_step = [&](const GenerationStep& s) {
        parser->feed(s.text, events);
        return true;
    };
    generate(e, e.render_chat(prompt), p, h);
    parser->finish(events);
    std::string reasoning, args, name;
    int begins = 0, ends = 0;
    for (const auto& ev : events) {
        if (ev.kind == ChatEvent::Kind::reasoning) reasoning += ev.text;
        if (ev.kind == ChatEvent::Kind::content) FAIL("unexpected content: " << ev.text);
        if (ev.kind == ChatEvent::Kind::tool_call_begin) name = ev.text, ++begins;
        if (ev.kind == ChatEvent::Kind::tool_call_args) args += ev.text;
        if (ev.kind == ChatEvent::Kind::tool_call_end) ++ends;
    }
    CHECK(reasoning == "The user wrote 5 bytes.");
    CHECK(name == "get_weather");
    CHECK(begins == 1);
    CHECK(ends == 1);
    CHECK(nlohmann::json::parse(args) == nlohmann::json{{"city", "Paris"}});
}
