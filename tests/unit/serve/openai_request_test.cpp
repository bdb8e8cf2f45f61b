// Tests for libaff/serve/openai_request: what a valid chat or completion request
// becomes, and the 400 error (message, param, code) for each kind of bad input.
#include "libaff/serve/openai_request.hpp"

#include <catch2/catch.hpp>

using namespace aff::serve;

namespace {
ChatRequest chat_ok(const std::string& body, bool default_thinking = false) {
    auto r = parse_chat_request(body, default_thinking);
    if (auto* e = std::get_if<ApiError>(&r)) FAIL("unexpected error: " << e->message);
    return std::get<ChatRequest>(r);
}
ApiError chat_err(const std::string& body) {
    auto r = parse_chat_request(body, false);
    REQUIRE(std::holds_alternative<ApiError>(r));
    return std::get<ApiError>(r);
}
ApiError completion_err(const std::string& body) {
    auto r = parse_completion_request(body);
    REQUIRE(std::holds_alternative<ApiError>(r));
    return std::get<ApiError>(r);
}
}  // namespace

TEST_CASE("a full chat request maps onto the prompt and sampling fields", "[serve]") {
    const auto r = chat_ok(R"({
      "model": "m", "max_completion_tokens": 100, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
      "min_p": 0.05, "seed": -3, "stop": ["\n\n", "END"], "stream": true,
      "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 3,
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "tool_choice": {"type": "function", "function": {"name": "f"}},
      "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null, "reasoning_content": "r",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"}]})");
    CHECK(r.model == "m");
    REQUIRE(r.prompt.messages.size() == 4);
    CHECK(r.prompt.messages[1].content == "ab");
    CHECK(r.prompt.messages[2].reasoning_content == "r");
    REQUIRE(r.prompt.messages[2].tool_calls.size() == 1);
    CHECK(r.prompt.messages[2].tool_calls[0].arguments == "{\"x\":1}");
    CHECK(r.prompt.messages[3].tool_call_id == "c1");
    CHECK(r.prompt.tools.size() == 1);
    CHECK(r.tool_choice == "function");
    CHECK(r.tool_choice_name == "f");
    CHECK(*r.sampling.max_tokens == 100);
    CHECK(*r.sampling.temperature == 0.5f);
    CHECK(*r.sampling.top_k == 40);
    CHECK(*r.sampling.seed == std::uint64_t(-3));
    CHECK(r.sampling.stop == std::vector<std::string>{"\n\n", "END"});
    CHECK(r.sampling.stream);
    CHECK(r.sampling.include_usage);
    CHECK(r.sampling.logprobs == 3);
    CHECK_FALSE(r.prompt.thinking);
}

TEST_CASE("thinking follows chat_template_kwargs, then thinking, then reasoning_effort", "[serve]") {
    const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
    CHECK(chat_ok("{" + m + R"(, "chat_template_kwargs": {"thinking": true}})").prompt.thinking);
    CHECK_FALSE(chat_ok("{" + m + R"(, "chat_template_kwargs": {"thinking": false}, "reasoning_effort": "high"})").prompt.thinking);
    CHECK(chat_ok("{" + m + R"(, "thinking": {"type": "enabled"}})").prompt.thinking);
    const auto max = chat_ok("{" + m + R"(, "reasoning_effort": "max"})");
    CHECK(max.prompt.thinking);
    CHECK(max.prompt.reasoning_effort == "max");
    CHECK_FALSE(chat_ok("{" + m + R"(, "reasoning_effort": "none"})", true).prompt.thinking);
    CHECK(chat_ok("{" + m + "}", true).prompt.thinking);
    CHECK(chat_err("{" + m + R"(, "reasoning_effort": "huge"})").param == "reasoning_effort");
}

TEST_CASE("bad chat requests give a 400 naming the field", "[serve]") {
    struct Case {
        const char* body;
        const char* param;
        const char* says;
    };
    const Case cases[] = {
        {R"({"messages": [)", "", "malformed JSON"},
        {R"([1, 2])", "", "must be a JSON object"},
        {R"({})", "messages", "required"},
        {R"({"messages": "hi"})", "messages", "must be an array"},
        {R"({"messages": []})", "messages", "must not be empty"},
        {R"({"messages": [{"role": "bot", "content": "x"}]})", "messages[0].role", "unknown role 'bot'"},
        {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", "a string or an array"},
        {R"({"messages": [{"role": "user"}]})", "messages[0].content", "required"},
        {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0].type", "not supported"},
        {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "n", "must be 1"},
        {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature", "must be a number"},
        {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature", "between 0.0 and 2.0"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens", "between 1"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})", "max_tokens", "an integer"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop[0]", "a string"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "stream", "a boolean"},
        {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs", "logprobs"},
        {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", "tools[0].function", "required"},
        {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice", "no 'tools'"},
        {R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 1})", "presence_penalty", "not supported"},
        {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]})",
         "messages[0].tool_calls[0].function.arguments", "JSON object"},
    };
    for (const auto& c : cases) {
        INFO(c.body);
        const ApiError e = chat_err(c.body);
        CHECK(e.status == 400);
        CHECK(e.type == "invalid_request_error");
        CHECK(e.param == c.param);
        CHECK_THAT(e.message, Catch::Contains(c.says));
    }
}

TEST_CASE("a body that is not UTF-8 is refused before JSON parsing", "[serve]") {
    const ApiError e = chat_err("{\"messages\": [{\"role\": \"user\", \"content\": \"\xC3\x28\"}]}");
    CHECK(e.code == "invalid_utf8");
    CHECK_FALSE(valid_utf8("\xED\xA0\x80"));       // surrogate
    CHECK_FALSE(valid_utf8("\xC0\x80"));           // overlong
    CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));   // past U+10FFFF
    CHECK(valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
}

TEST_CASE("the error object has OpenAI's shape", "[serve]") {
    ApiError e;
    e.message = "m";
    e.param = "p";
    CHECK(e.to_json() == nlohmann::json::parse(R"({"error": {"message": "m", "type": "invalid_request_error",
                                                           "param": "p", "code": null}})"));
}

TEST_CASE("completion prompts: text, token ids, a batch of one; larger batches refused", "[serve]") {
    auto ok = [](const std::string& body) {
        auto r = parse_completion_request(body);
        REQUIRE(std::holds_alternative<CompletionRequest>(r));
        return std::get<CompletionRequest>(r);
    };
    CHECK(ok(R"({"prompt": "abc"})").prompt_text == "abc");
    const auto t = ok(R"({"prompt": [[5, 6]], "logprobs": 2})");
    CHECK(t.prompt_is_tokens);
    CHECK(t.prompt_tokens == std::vector<std::int32_t>{5, 6});
    CHECK(t.sampling.logprobs == 2);
    CHECK(completion_err(R"({"prompt": ["a", "b"]})").param == "prompt");
    CHECK(completion_err(R"({"prompt": [-1]})").param == "prompt[0]");
    CHECK(completion_err(R"({"prompt": "a", "echo": true})").param == "echo");
    CHECK(completion_err(R"({"prompt": "a", "logprobs": 9})").param == "logprobs");
    CHECK(completion_err(R"({})").param == "prompt");
}

TEST_CASE("a body nesting deeper than the limit is refused before it is parsed", "[serve]") {
    CHECK(json_depth_within("[[[]]]", 3));
    CHECK_FALSE(json_depth_within("[[[[]]]]", 3));
    CHECK(json_depth_within(R"({"a": "[[[[[[[[", "b": [1, {"c": "\"]]]]"}]})", 3));  // brackets in strings do not count
    CHECK_FALSE(json_depth_within(R"({"a": [{"b": [[]]}]})", 4));
    // 100 000 levels in an ignored field: the recursive parser overflowed a thread's stack.
    const std::string deep = R"({"messages": [{"role": "user", "content": "hi"}], "x": )" + std::string(100000, '[') +
                             std::string(100000, ']') + "}";
    const ApiError e = chat_err(deep);
    CHECK(e.status == 400);
    CHECK(e.code == "invalid_json");
    CHECK(e.message == "request body nests arrays and objects deeper than 512 levels");
    const ApiError c = completion_err(R"({"prompt": "x", "y": )" + std::string(600, '{') + "}");
    CHECK(c.message == "request body nests arrays and objects deeper than 512 levels");
    // 512 levels are still fine.
    const std::string ok = R"({"messages": [{"role": "user", "content": "hi"}], "x": )" + std::string(510, '[') +
                           std::string(510, ']') + "}";
    CHECK(chat_ok(ok).prompt.messages.size() == 1);
}
