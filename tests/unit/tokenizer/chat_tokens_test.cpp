// Chat encoding through the real tokenizer, as aff-serve uses it: a rendered prompt
// encodes with its turn markers as single ids and decodes back unchanged, and generated
// ids streamed through StreamDecoder and StreamingParser give what parse_completion gives
// on the whole text.
#include "chat_golden.hpp"
#include "support.hpp"

#include "libaff/tokenizer/chat.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

namespace chat = aff::chat;
namespace tk = aff::tokenizer;

TEST_CASE("a rendered prompt encodes with single-id turn markers and decodes unchanged", "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    std::vector<chat::Message> msgs(2);
    msgs[0].role = "system";
    msgs[0].content = "Be brief.";
    msgs[1].role = "user";
    msgs[1].content = "Hi there";
    std::string prompt = chat::render_prompt(msgs, nullptr, {});
    CHECK(prompt == "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi there<｜Assistant｜></think>");
    auto ids = tok.encode(prompt);
    REQUIRE(ids.size() > 5);
    CHECK(ids.front() == 0);
    CHECK(std::count(ids.begin(), ids.end(), 128803) == 1);
    CHECK(std::count(ids.begin(), ids.end(), 128804) == 1);
    CHECK(tok.decode(ids) == prompt);
}

TEST_CASE("generated ids streamed through both decoders parse like the whole text", "[tokenizer]") {
    const auto& tok = aff_test::deepseek();
    const std::string text = "Let me think about 天气 😀.</think>Calling the tool.\n\n<｜DSML｜tool_calls>\n"
                             "<｜DSML｜invoke name=\"get_weather\">\n"
                             "<｜DSML｜parameter name=\"city\" string=\"true\">Zürich</｜DSML｜parameter>\n"
                             "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
                             "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
    auto ids = tok.encode(text);
    CHECK(ids.back() == 1);
    tk::StreamDecoder decoder(tok);
    chat::StreamingParser parser(chat::ThinkingMode::thinking);
    std::string reasoning, content;
    std::vector<chat::ToolCall> calls;
    auto take = [&](const chat::StreamDelta& d) {
        reasoning += d.reasoning;
        content += d.content;
        for (const auto& c : d.tool_calls) calls.push_back(c.call);
    };
    for (tk::TokenId id : ids) take(parser.feed(decoder.push(id)));
    take(parser.feed(decoder.finish()));
    take(parser.finish());
    chat::ParsedCompletion whole = chat::parse_completion(text, chat::ThinkingMode::thinking);
    CHECK(reasoning == "Let me think about 天气 😀.");
    CHECK(reasoning == whole.reasoning);
    CHECK(content == "Calling the tool.");
    CHECK(content == whole.content);
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].name == "get_weather");
    CHECK(calls[0].arguments_json == "{\"city\": \"Zürich\", \"days\": 3}");
    CHECK(parser.result().finished);
}

TEST_CASE("every golden prompt encodes from its pieces to the ids of the whole text", "[tokenizer]") {
    // Where no message spells a special token, keeping the messages plain changes
    // nothing: the ids are the reference pipeline's. Where one does (a golden case does
    // on purpose), the reference turns it into a special token and encode_pieces keeps
    // it text: same text, other ids.
    const auto& tok = aff_test::deepseek();
    const auto cases = aff_test::load_chat_golden("render_cases.json");
    REQUIRE(cases.size() >= 30);
    std::size_t clean = 0, forged = 0;
    for (const auto& c : cases) {
        INFO(c["name"].get<std::string>());
        const auto [messages, opt] = aff_test::golden_render(c);
        const auto pieces = chat::render_prompt_pieces(messages, c["tools"], opt, c["response_format"]);
        std::vector<tk::Tokenizer::Piece> views;
        bool spelled = false;
        for (const auto& p : pieces) {
            if (!p.markup)
                for (const auto& a : tok.added_tokens()) spelled = spelled || p.text.find(a.content) != std::string::npos;
            views.push_back({p.text, p.markup});
        }
        const auto ids = tok.encode_pieces(views);
        const auto reference = tok.encode(c["prompt"].get<std::string>());
        if (spelled) {
            CHECK(ids != reference);
            CHECK(ids.size() > reference.size());
            CHECK(tok.decode(ids) == c["prompt"].get<std::string>());
            ++forged;
        } else {
            CHECK(ids == reference);
            ++clean;
        }
    }
    CHECK(clean >= 30);
    CHECK(forged >= 1);
}
