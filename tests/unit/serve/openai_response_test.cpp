// Tests for libaff/serve/openai_response: ChatEvents become OpenAI deltas the way
// OpenAI streams them (tool calls: index + id + name first, argument fragments
// after), and the final message agrees with the concatenated deltas.
#include "libaff/serve/openai_response.hpp"

#include <catch2/catch.hpp>

using namespace aff::serve;
using nlohmann::json;
using K = ChatEvent::Kind;

TEST_CASE("reasoning, content and two tool calls stream as OpenAI deltas", "[serve]") {
    ChatReplyBuilder b("chatcmpl-x", "m", 123);
    std::vector<json> d = b.deltas({{K::reasoning, "thin"}, {K::reasoning, "king"}, {K::content, "Hi"}});
    REQUIRE(d.size() == 2);
    CHECK(d[0] == json{{"reasoning_content", "thinking"}});
    CHECK(d[1] == json{{"content", "Hi"}});

    d = b.deltas({{K::tool_call_begin, "get_weather"}, {K::tool_call_args, "{\"city\": "}});
    REQUIRE(d.size() == 2);
    const json first = d[0]["tool_calls"][0];
    CHECK(first["index"] == 0);
    CHECK(first["type"] == "function");
    CHECK(first["function"]["name"] == "get_weather");
    CHECK(first["function"]["arguments"] == "");
    CHECK(first["id"].get<std::string>().rfind("call_", 0) == 0);
    CHECK(d[1] == json{{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"city\": "}}}}}}});

    d = b.deltas({{K::tool_call_args, "\"Paris\"}"}, {K::tool_call_end, ""}, {K::tool_call_begin, "time"},
                  {K::tool_call_args, "{}"}, {K::tool_call_end, ""}});
    REQUIRE(d.size() == 3);
    CHECK(d[1]["tool_calls"][0]["index"] == 1);
    CHECK(d[2]["tool_calls"][0]["index"] == 1);

    const json m = b.message();
    CHECK(m["role"] == "assistant");
    CHECK(m["content"] == "Hi");
    CHECK(m["reasoning_content"] == "thinking");
    REQUIRE(m["tool_calls"].size() == 2);
    CHECK(m["tool_calls"][0]["function"]["arguments"] == "{\"city\": \"Paris\"}");
    CHECK(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()) == json{{"city", "Paris"}});
    CHECK(m["tool_calls"][1]["function"]["name"] == "time");
    CHECK(m["tool_calls"][0]["id"] == first["id"]);
    CHECK(b.finish_reason(aff::FinishReason::stop) == "tool_calls");
    CHECK(b.finish_reason(aff::FinishReason::length) == "length");
}

TEST_CASE("a reply with only tool calls has null content; a plain one has no tool_calls", "[serve]") {
    ChatReplyBuilder calls("id", "m", 0);
    calls.deltas({{K::tool_call_begin, "f"}, {K::tool_call_args, "{}"}, {K::tool_call_end, ""}});
    CHECK(calls.message()["content"].is_null());
    ChatReplyBuilder plain("id", "m", 0);
    plain.deltas({{K::content, "x"}});
    CHECK(plain.message() == json{{"role", "assistant"}, {"content", "x"}, {"refusal", nullptr}});
    CHECK(plain.finish_reason(aff::FinishReason::stop) == "stop");
}

TEST_CASE("a chunk carries id, object, model and one choice", "[serve]") {
    ChatReplyBuilder b("chatcmpl-1", "m", 99);
    const json c = b.chunk({{"content", "a"}}, "stop");
    CHECK(c["id"] == "chatcmpl-1");
    CHECK(c["object"] == "chat.completion.chunk");
    CHECK(c["created"] == 99);
    CHECK(c["model"] == "m");
    CHECK(c["choices"][0]["delta"]["content"] == "a");
    CHECK(c["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("usage and timings add up", "[serve]") {
    GenerationResult r;
    r.prompt_tokens = 10;
    r.completion_tokens = 5;
    r.prompt_ms = 200;
    r.decode_ms = 500;
    r.cached_tokens = 6;
    CHECK(usage_json(r) == json{{"prompt_tokens", 10},
                                {"completion_tokens", 5},
                                {"total_tokens", 15},
                                {"prompt_tokens_details", {{"cached_tokens", 6}}}});
    const json t = timings_json(r);
    // llama.cpp's split: cache_n from the cache, prompt_n computed (the rate is of those).
    CHECK(t["cache_n"] == 6);
    CHECK(t["prompt_n"] == 4);
    CHECK(t["prompt_per_second"] == Approx(20.0));
    CHECK(t["predicted_per_second"] == Approx(10.0));
    CHECK(!t.contains("draft_n"));  // no drafter: no draft fields

    r.drafting = true;
    r.verify_calls = 4;
    r.drafted_tokens = 10;
    r.accepted_tokens = 6;
    r.drafted_at = {4, 4, 2};
    r.accepted_at = {3, 2, 1};
    const json d = timings_json(r);
    CHECK(d["draft_n"] == 10);
    CHECK(d["draft_n_accepted"] == 6);
    CHECK(d["draft_verify_n"] == 4);
    CHECK(d["draft_mean_accepted"] == Approx(1.5));
    REQUIRE(d["draft_acceptance_by_position"].size() == 3);
    CHECK(d["draft_acceptance_by_position"][0] == Approx(0.75));
    CHECK(d["draft_acceptance_by_position"][1] == Approx(0.5));
    CHECK(d["draft_acceptance_by_position"][2] == Approx(0.5));
}
