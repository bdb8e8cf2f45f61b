// The model engine's prefix cache on the random tiny checkpoint with the real tokenizer
// (fixture of tests/unit/serve/setup.cmake). First what a two-turn chat looks like in V4's
// encoding, which decides where snapshots pay: without thinking the second prompt starts
// with the whole first prompt and the reply's tokens; in thinking mode the first prompt
// ended in "<think>" where the second writes "</think>" and drops the reasoning, so only
// the part up to the last <｜Assistant｜> is shared, unless tools keep the reasoning. Then
// the engine: the second turn restores a snapshot, reports the tokens it took from it, and
// its logits equal those of an engine without the cache, bit for bit.
#include "libaff/serve/model_engine.hpp"
#include "unit/serve/engine_steps.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

namespace serve = aff::serve;

namespace {

constexpr std::int32_t kAssistant = 128804;

std::unique_ptr<serve::ModelEngine> load_engine(std::size_t cache_bytes) {
    serve::ModelEngineOptions o;
    o.model_path = AFF_RANDOM_MODEL_DIR;
    o.tokenizer_path = AFF_TOKENIZER_JSON;
    o.threads = 2;
    o.backend.gpus = 0;
    o.prefix_cache_bytes = cache_bytes;
    if (!std::filesystem::exists(o.model_path + "/config.json"))
        throw std::runtime_error(o.model_path + " is missing: run ctest (fixture setup.random_model)");
    return serve::ModelEngine::load(o);
}

serve::ChatMessage message(const char* role, std::string content, std::string reasoning = {}) {
    serve::ChatMessage m;
    m.role = role;
    m.content = std::move(content);
    m.reasoning_content = std::move(reasoning);
    return m;
}

std::size_t common_prefix(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
    return std::size_t(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

std::size_t after_last_assistant(const std::vector<std::int32_t>& t) {
    const auto it = std::find(t.rbegin(), t.rend(), kAssistant);
    REQUIRE(it != t.rend());
    return std::size_t(t.rend() - it);
}

struct TwoTurns {
    std::vector<std::int32_t> first, second;
};

// The first turn's prompt, and the second's after the assistant answered `answer` (with
// `reasoning` in thinking mode).
TwoTurns two_turns(const serve::ModelEngine& e, bool thinking, bool tools) {
    serve::ChatPrompt p;
    p.thinking = thinking;
    if (tools)
        p.tools = nlohmann::ordered_json::parse(
            R"([{"type":"function","function":{"name":"clock","parameters":{"type":"object","properties":{}}}}])");
    p.messages.push_back(message("system", "You are terse."));
    p.messages.push_back(message("user", "What is the capital of France?"));
    TwoTurns t;
    t.first = e.render_chat(p);
    p.messages.push_back(message("assistant", "Paris.", "The user asks about France. Easy."));
    p.messages.push_back(message("user", "And of Italy?"));
    t.second = e.render_chat(p);
    return t;
}

}  // namespace

TEST_CASE("V4 chat encoding: what a second turn shares with the first", "[serve]") {
    auto e = load_engine(0);
    const aff::tokenizer::Tokenizer& tok = e->tokenizer();
    auto ids = [&](const std::string& text) {
        const auto v = tok.encode(text, false);
        return std::vector<std::int32_t>(v.begin(), v.end());
    };
    SECTION("without thinking the whole first prompt, then the answer's tokens, are shared") {
        const TwoTurns t = two_turns(*e, false, false);
        REQUIRE(t.second.size() > t.first.size());
        CHECK(common_prefix(t.first, t.second) == t.first.size());
        const auto answer = ids("Paris.");
        CHECK(std::equal(answer.begin(), answer.end(), t.second.begin() + std::ptrdiff_t(t.first.size())));
    }
    SECTION("in thinking mode the prompts part just after the first prompt's last <｜Assistant｜>") {
        const TwoTurns t = two_turns(*e, true, false);
        const std::size_t shared = common_prefix(t.first, t.second);
        CHECK(shared < t.first.size());
        CHECK(shared == after_last_assistant(t.first));
        // The first prompt opened its reasoning; the second closes the old turn's at once.
        CHECK(tok.decode(std::vector<aff::tokenizer::TokenId>(t.first.begin() + std::ptrdiff_t(shared), t.first.end())) ==
              "<think>");
    }
    SECTION("in thinking mode with tools the reasoning is kept, but joins the prompt's last token") {
        // The first prompt ends "<", "think", ">"; the second writes "<think>The user ..."
        // and the tokenizer makes ">The" one token, so the second prompt shares all of the
        // first but its last token: the end-of-generation state (which ran ">" and then the
        // model's tokens) is no prefix of it, the prompt's snapshot after <｜Assistant｜> is.
        const TwoTurns t = two_turns(*e, true, true);
        const std::size_t shared = common_prefix(t.first, t.second);
        CHECK(shared == t.first.size() - 1);
        CHECK(shared > after_last_assistant(t.first));
        CHECK(e->token_text(t.first.back()) == ">");
        CHECK(e->token_text(t.second[shared]) == ">The");
        const auto rest = ids(" user asks about France");
        CHECK(std::equal(rest.begin(), rest.end(), t.second.begin() + std::ptrdiff_t(shared) + 1));
    }
}

TEST_CASE("model engine: a second turn restores a snapshot and gives the uncached logits", "[serve]") {
    auto cached = load_engine(std::size_t(64) << 20);
    auto plain = load_engine(0);
    CHECK(cached->prefix_cache_description() == "prefix cache 64.00 MiB");
    CHECK(plain->prefix_cache_description() == "prefix cache off");
    CHECK_FALSE(plain->prefix_cache_stats());
    for (bool thinking : {false, true}) {
        INFO("thinking " << thinking);
        cached->set_prefix_cache(std::size_t(64) << 20);  // empty again: the two modes share a prefix
        const TwoTurns t = two_turns(*cached, thinking, false);
        // Turn 1: prefill, decode steps as if the model wrote them, the end of the
        // generation. Without thinking it "answers" the answer turn 2 carries (then its end
        // token, sampled but never run), so the end-of-generation snapshot prefixes turn 2;
        // in thinking mode turn 2 drops what it wrote, and the prompt's snapshot is used.
        const auto answer_ids = cached->tokenizer().encode("Paris.", false);
        const std::vector<std::int32_t> answer =
            thinking ? std::vector<std::int32_t>{6366, 2058} : std::vector<std::int32_t>(answer_ids.begin(), answer_ids.end());
        aff::test::prefill(*cached, t.first);
        CHECK(cached->cached_tokens() == 0);
        for (std::int32_t tok : answer) aff::test::decode(*cached, tok);
        cached->end_sequence();

        // Turn 2 on both engines.
        const auto got = aff::test::prefill(*cached, t.second);
        const std::vector<float> with(got.begin(), got.end());
        const std::size_t expect = thinking ? after_last_assistant(t.first) : t.first.size() + answer.size();
        CHECK(cached->cached_tokens() == expect);
        const auto ref = aff::test::prefill(*plain, t.second);
        CHECK(plain->cached_tokens() == 0);
        CHECK(with == std::vector<float>(ref.begin(), ref.end()));
        // Decoding on from the restored state stays identical too.
        const auto d1 = aff::test::decode(*cached, 19923);
        const std::vector<float> dc(d1.begin(), d1.end());
        const auto d2 = aff::test::decode(*plain, 19923);
        CHECK(dc == std::vector<float>(d2.begin(), d2.end()));
        cached->end_sequence();
    }
    const auto stats = cached->prefix_cache_stats();
    REQUIRE(stats);
    CHECK(stats->lookups == 2);  // the cache was emptied for the second mode
    CHECK(stats->hits == 1);
    CHECK(stats->entries == 4);  // each turn's prompt (to its last <｜Assistant｜>) and its end
    CHECK(stats->bytes <= stats->capacity_bytes);
    CHECK(stats->bytes > 0);
}

TEST_CASE("model engine: a repeated prompt is prefilled from its own snapshot", "[serve]") {
    auto e = load_engine(std::size_t(64) << 20);
    const std::vector<std::int32_t> prompt = e->tokenize("Once upon a time there was", true);
    REQUIRE(prompt.size() > 3);
    const auto first = aff::test::prefill(*e, prompt);
    const std::vector<float> a(first.begin(), first.end());
    CHECK(e->cached_tokens() == 0);
    e->end_sequence();
    const auto second = aff::test::prefill(*e, prompt);
    // No <｜Assistant｜> in a plain prompt: the snapshot is one token short of the end.
    CHECK(e->cached_tokens() == prompt.size() - 1);
    CHECK(std::vector<float>(second.begin(), second.end()) == a);
    // A <｜Assistant｜> far from the end of a raw prompt does not move the snapshot there.
    const std::vector<std::int32_t> raw =
        e->tokenize("<｜Assistant｜> and so the story went on and on, for many more words than eight", true);
    REQUIRE(raw[1] == kAssistant);
    REQUIRE(raw.size() > 12);
    aff::test::prefill(*e, raw);
    e->end_sequence();
    aff::test::prefill(*e, raw);
    CHECK(e->cached_tokens() == raw.size() - 1);
    // A one-token prompt has nothing to cache.
    aff::test::prefill(*e, std::vector<std::int32_t>{0});
    CHECK(e->cached_tokens() == 0);
}
