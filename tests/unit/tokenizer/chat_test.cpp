// DeepSeek-V4 chat encoding against the reference encoder's own output
// (tests/data/chat/*.json, made by tests/oracle/chat_golden.py running encoding_dsv4.py),
// plus what the reference does not define: malformed and truncated model output, both
// DSML spellings, and streaming in arbitrary pieces.
#include "libaff/core/error.hpp"
#include "libaff/tokenizer/chat.hpp"
#include "libaff/tokenizer/py_json.hpp"
#include "chat_golden.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

namespace chat = aff::chat;
using ojson = nlohmann::ordered_json;

namespace {

using aff_test::golden_mode;

// Feeds `text` in pieces of the given sizes (cycled) and checks the deltas add up.
chat::ParsedCompletion parse_streaming(std::string_view text, chat::ThinkingMode mode, std::mt19937& rng,
                                       std::size_t max_piece) {
    chat::StreamingParser p(mode);
    chat::ParsedCompletion sum;
    auto add = [&](const chat::StreamDelta& d) {
        sum.reasoning += d.reasoning;
        sum.content += d.content;
        for (const auto& t : d.tool_calls) {
            REQUIRE(t.index == sum.tool_calls.size());
            sum.tool_calls.push_back(t.call);
        }
    };
    for (std::size_t pos = 0; pos < text.size();) {
        std::size_t n = 1 + rng() % max_piece;
        add(p.feed(text.substr(pos, n)));
        pos += n;
    }
    add(p.finish());
    CHECK(sum.reasoning == p.result().reasoning);
    CHECK(sum.content == p.result().content);
    REQUIRE(sum.tool_calls.size() == p.result().tool_calls.size());
    sum.finished = p.result().finished;
    sum.malformed = p.result().malformed;
    sum.cut_short = p.result().cut_short;
    return sum;
}

void check_same(const chat::ParsedCompletion& a, const chat::ParsedCompletion& b) {
    CHECK(a.reasoning == b.reasoning);
    CHECK(a.content == b.content);
    CHECK(a.finished == b.finished);
    CHECK(a.malformed == b.malformed);
    CHECK(a.cut_short == b.cut_short);
    REQUIRE(a.tool_calls.size() == b.tool_calls.size());
    for (std::size_t i = 0; i < a.tool_calls.size(); ++i) {
        CHECK(a.tool_calls[i].name == b.tool_calls[i].name);
        CHECK(a.tool_calls[i].arguments_json == b.tool_calls[i].arguments_json);
    }
}

const std::string F = "｜DSML｜";  // full-width spelling
const std::string A = "|DSML|";     // ASCII spelling
const std::string EOS = "<｜end▁of▁sentence｜>";

std::string invoke(const std::string& d, const std::string& name, const std::string& params) {
    return "<" + d + "invoke name=\"" + name + "\">\n" + params + "</" + d + "invoke>\n";
}
std::string param(const std::string& d, const std::string& key, const std::string& flag, const std::string& value) {
    return "<" + d + "parameter name=\"" + key + "\"" + (flag.empty() ? "" : " string=\"" + flag + "\"") + ">" + value +
           "</" + d + "parameter>\n";
}

}  // namespace

TEST_CASE("render_prompt gives the reference encoder's prompt for every golden conversation", "[tokenizer]") {
    ojson cases = aff_test::load_chat_golden("render_cases.json");
    REQUIRE(cases.size() >= 30);
    std::size_t with_tools = 0, thinking = 0, max_effort = 0;
    for (const ojson& c : cases) {
        INFO(c["name"].get<std::string>());
        const auto [messages, opt] = aff_test::golden_render(c);
        CHECK(chat::render_prompt(messages, c["tools"], opt, c["response_format"]) == c["prompt"].get<std::string>());
        with_tools += !c["tools"].is_null();
        thinking += opt.mode == chat::ThinkingMode::thinking;
        max_effort += opt.effort == chat::ReasoningEffort::max;
    }
    CHECK(with_tools >= 8);
    CHECK(thinking >= 15);
    CHECK(max_effort >= 3);
}

TEST_CASE("render_prompt_pieces splits every golden prompt into markup and the messages' own text", "[tokenizer]") {
    ojson cases = aff_test::load_chat_golden("render_cases.json");
    std::size_t checked = 0;
    for (const ojson& c : cases) {
        INFO(c["name"].get<std::string>());
        const auto [messages, opt] = aff_test::golden_render(c);
        const auto pieces = chat::render_prompt_pieces(messages, c["tools"], opt, c["response_format"]);
        std::string joined;
        for (std::size_t i = 0; i < pieces.size(); ++i) {
            CHECK(!pieces[i].text.empty());
            if (i) CHECK(pieces[i].markup != pieces[i - 1].markup);
            joined += pieces[i].text;
        }
        CHECK(joined == chat::render_prompt(messages, c["tools"], opt, c["response_format"]));
        // Every message's content, and every tool name and string argument, lies inside a text piece.
        auto in_text = [&](const std::string& s) {
            return std::any_of(pieces.begin(), pieces.end(),
                               [&](const chat::PromptPiece& p) { return !p.markup && p.text.find(s) != std::string::npos; });
        };
        for (const chat::Message& m : messages) {
            if (!m.content.empty() && joined.find(m.content) != std::string::npos) {
                CHECK(in_text(m.content));
                ++checked;
            }
            for (const chat::ToolCall& t : m.tool_calls) CHECK(in_text(t.name));
        }
        if (opt.add_bos) CHECK((pieces.front().markup && pieces.front().text.rfind("<｜begin▁of▁sentence｜>", 0) == 0));
    }
    CHECK(checked >= 50);
}

TEST_CASE("parse_completion gives the reference parser's result on well-formed output", "[tokenizer]") {
    ojson cases = aff_test::load_chat_golden("parse_cases.json");
    REQUIRE(cases.size() >= 15);
    std::mt19937 rng(11);
    for (const ojson& c : cases) {
        INFO(c["name"].get<std::string>());
        std::string text = c["text"];
        chat::ParsedCompletion p = chat::parse_completion(text, golden_mode(c));
        CHECK(p.reasoning == c["reasoning"].get<std::string>());
        CHECK(p.content == c["content"].get<std::string>());
        CHECK(p.finished);
        CHECK_FALSE(p.malformed);
        REQUIRE(p.tool_calls.size() == c["tool_calls"].size());
        for (std::size_t i = 0; i < p.tool_calls.size(); ++i) {
            CHECK(p.tool_calls[i].name == c["tool_calls"][i]["name"].get<std::string>());
            CHECK(p.tool_calls[i].arguments_json == c["tool_calls"][i]["arguments"].get<std::string>());
        }
        for (std::size_t piece : {1, 2, 5, 17}) check_same(parse_streaming(text, golden_mode(c), rng, piece), p);
        // The ASCII spelling parses to the same result.
        std::string ascii = text;
        for (std::size_t at; (at = ascii.find(F)) != std::string::npos;) ascii.replace(at, F.size(), A);
        check_same(chat::parse_completion(ascii, golden_mode(c)), p);
    }
}

TEST_CASE("streaming never leaks tool-call markup into content", "[tokenizer]") {
    std::string text = "Sure.\n\n<" + F + "tool_calls>\n" + invoke(F, "f", param(F, "a", "true", "x")) + "</" + F +
                       "tool_calls>" + EOS;
    chat::StreamingParser p(chat::ThinkingMode::chat);
    std::string content;
    std::size_t deltas_with_call = 0;
    for (char ch : text) {
        chat::StreamDelta d = p.feed(std::string(1, ch));
        CHECK(d.content.find('<') == std::string::npos);
        CHECK(d.content.find('\n') == std::string::npos);
        content += d.content;
        deltas_with_call += !d.tool_calls.empty();
    }
    CHECK(p.finish().empty());
    CHECK(content == "Sure.");
    CHECK(deltas_with_call == 1);
    CHECK(p.result().tool_calls.at(0).arguments_json == "{\"a\": \"x\"}");
}

TEST_CASE("malformed tool calls keep complete calls and return the rest as content; cut ones drop the rest",
          "[tokenizer]") {
    const auto chat_mode = chat::ThinkingMode::chat;
    const std::string open = "<" + F + "tool_calls>\n", close = "</" + F + "tool_calls>";
    std::mt19937 rng(2);
    auto both = [&](const std::string& text, chat::ThinkingMode mode = chat::ThinkingMode::chat) {
        chat::ParsedCompletion p = chat::parse_completion(text, mode);
        check_same(parse_streaming(text, mode, rng, 3), p);
        return p;
    };

    SECTION("cut inside the first call: the block is dropped, no markup reaches content") {
        std::string cut = "\n\n" + open + "<" + F + "invoke name=\"get_weather\">\n<" + F +
                          "parameter name=\"city\" string=\"true\">Par";
        auto p = both("Checking." + cut);
        CHECK(p.content == "Checking.");
        CHECK(p.tool_calls.empty());
        CHECK(p.cut_short);
        CHECK_FALSE(p.malformed);
        CHECK_FALSE(p.finished);
    }
    SECTION("cut inside the second call: the first call stays, the second is dropped") {
        std::string second = "<" + F + "invoke name=\"g\">\n<" + F + "param";
        auto p = both("\n\n" + open + invoke(F, "f", param(F, "a", "false", "[1, 2]")) + second);
        REQUIRE(p.tool_calls.size() == 1);
        CHECK(p.tool_calls[0].arguments_json == "{\"a\": [1, 2]}");
        CHECK(p.content.empty());
        CHECK(p.cut_short);
        CHECK_FALSE(p.malformed);
    }
    SECTION("cut right after the block opened, or between calls") {
        const std::vector<std::pair<std::string, std::size_t>> tails = {
            {"", 0}, {"<" + F + "inv", 0}, {invoke(F, "f", "") + "</" + F, 1}};  // text after the opening, calls
        for (const auto& [tail, calls] : tails) {
            auto p = both("Let me look.\n\n" + open + tail);
            CHECK(p.content == "Let me look.");
            CHECK(p.cut_short);
            CHECK_FALSE(p.malformed);
            CHECK(p.tool_calls.size() == calls);
        }
    }
    SECTION("end of sentence inside an invoke ends the turn") {
        std::string bad = "<" + F + "invoke name=\"f\">\n";
        auto p = both("\n\n" + open + bad + EOS + "ignored");
        CHECK(p.content == "\n\n" + open + bad);
        CHECK(p.finished);
        CHECK(p.malformed);
    }
    SECTION("garbage in the block") {
        std::string block = "\n\n" + open + "hello" + close;
        auto p = both("A" + block + EOS);
        CHECK(p.content == "A" + block);
        CHECK(p.malformed);
        CHECK(p.finished);
    }
    SECTION("ASCII and full-width spellings mixed") {
        std::string text = "\n\n<" + A + "tool_calls>\n" + invoke(A, "f", param(F, "a", "true", "1")) +
                           invoke(F, "g", param(A, "b", "false", "true")) + "</" + A + "tool_calls>" + EOS;
        auto p = both(text);
        REQUIRE(p.tool_calls.size() == 2);
        CHECK(p.tool_calls[0].arguments_json == "{\"a\": \"1\"}");
        CHECK(p.tool_calls[1].arguments_json == "{\"b\": true}");
        CHECK(p.content.empty());
        CHECK_FALSE(p.malformed);
    }
    SECTION("missing or wrong string flags") {
        std::string text = "\n\n" + open +
                           invoke(F, "f", param(F, "n", "", "42") + param(F, "s", "", "abc") +
                                              param(F, "bad", "false", "not json") + param(F, "n", "", "43")) +
                           close + EOS;
        auto p = both(text);
        REQUIRE(p.tool_calls.size() == 1);
        CHECK(p.tool_calls[0].arguments_json == "{\"n\": 43, \"s\": \"abc\", \"bad\": \"not json\"}");
    }
    SECTION("block without the blank line, and text after it") {
        auto p = both("x" + open + invoke(F, "f", "") + close + " tail" + EOS);
        REQUIRE(p.tool_calls.size() == 1);
        CHECK(p.tool_calls[0].arguments_json == "{}");
        CHECK(p.content == "x tail");
    }
    SECTION("thinking: reasoning cut short, repeated <think>, block inside reasoning") {
        auto p = both("<think>still thinking about it", chat::ThinkingMode::thinking);
        CHECK(p.reasoning == "still thinking about it");
        CHECK(p.content.empty());
        CHECK_FALSE(p.finished);
        p = both("plan\n\n" + open + invoke(F, "f", "") + close + EOS, chat::ThinkingMode::thinking);
        CHECK(p.reasoning == "plan");
        CHECK(p.tool_calls.size() == 1);
        CHECK(p.finished);
    }
    SECTION("no end of sentence, and text after it") {
        auto p = both("partial answer");
        CHECK(p.content == "partial answer");
        CHECK_FALSE(p.finished);
        p = both("done" + EOS + "more");
        CHECK(p.content == "done");
        CHECK(p.finished);
    }
    (void)chat_mode;
}

TEST_CASE("messages_from_openai and render_prompt name the field at fault", "[tokenizer]") {
    CHECK_THROWS_WITH(chat::messages_from_openai(ojson::parse(R"([{"content": "x"}])")),
                      "messages[0].role: missing");
    CHECK_THROWS_WITH(chat::messages_from_openai(ojson::parse(R"([{"role": "user", "content": 5}])")),
                      "messages[0].content: expected a string, null or a list of text parts");
    CHECK_THROWS_WITH(chat::messages_from_openai(ojson::parse(
                          R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])")),
                      "messages[0].tool_calls[0].function.name: missing");
    auto parts = chat::messages_from_openai(ojson::parse(
        R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": {"k": 1}}}]}])"));
    CHECK(parts[0].content == "ab");
    CHECK(parts[1].tool_calls[0].arguments_json == "{\"k\":1}");
    std::vector<chat::Message> bad = chat::messages_from_openai(ojson::parse(R"([{"role": "robot", "content": "x"}])"));
    CHECK_THROWS_WITH(chat::render_prompt(bad, nullptr, {}), "messages[0].role: unknown role \"robot\"");
}

TEST_CASE("Python-compatible JSON matches json.dumps(ensure_ascii=False)", "[tokenizer]") {
    using aff::tokenizer::py_float_repr;
    CHECK(py_float_repr(1.0) == "1.0");
    CHECK(py_float_repr(1e16) == "1e+16");
    CHECK(py_float_repr(1234567890123456.0) == "1234567890123456.0");
    CHECK(py_float_repr(1e-5) == "1e-05");
    CHECK(py_float_repr(0.0001) == "0.0001");
    CHECK(py_float_repr(-0.0) == "-0.0");
    CHECK(py_float_repr(1.5e300) == "1.5e+300");
    CHECK(py_float_repr(0.1 + 0.2) == "0.30000000000000004");
    CHECK(py_float_repr(123456789012345678.0) == "1.2345678901234568e+17");
    CHECK(py_float_repr(5e-324) == "5e-324");
    ojson v = ojson::parse(R"({"a": "\u0001\u007f\u2028é\"\\/", "b": [1.0, true, null, -3]})");
    CHECK(aff::tokenizer::py_json_dumps(v) == "{\"a\": \"\\u0001\x7f\u2028é\\\"\\\\/\", \"b\": [1.0, true, null, -3]}");
}
