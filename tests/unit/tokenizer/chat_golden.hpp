// The reference encoder's golden chat cases (tests/data/chat/*.json, made by
// tests/oracle/chat_golden.py), read one way for the tests that render them (chat_test,
// chat_tokens_test): a file's cases, a case's thinking mode, and a render case's messages
// and options as the reference rendered them.
#pragma once

#include "libaff/tokenizer/chat.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace aff_test {

inline nlohmann::ordered_json load_chat_golden(const char* name) {
    std::ifstream in(std::string(AFF_TEST_DATA) + "/chat/" + name);
    REQUIRE(in);
    return nlohmann::ordered_json::parse(in);
}

inline aff::chat::ThinkingMode golden_mode(const nlohmann::ordered_json& c) {
    return c["thinking_mode"] == "thinking" ? aff::chat::ThinkingMode::thinking : aff::chat::ThinkingMode::chat;
}

struct GoldenRender {
    std::vector<aff::chat::Message> messages;
    aff::chat::RenderOptions opt;
};

// A case of render_cases.json: its messages (wo_eos: no end-of-sentence after the turn) and
// the options the reference rendered them with.
inline GoldenRender golden_render(const nlohmann::ordered_json& c) {
    namespace chat = aff::chat;
    GoldenRender r;
    r.messages = chat::messages_from_openai(c["messages"]);
    for (std::size_t i = 0; i < r.messages.size(); ++i) r.messages[i].without_eos = c["messages"][i].value("wo_eos", false);
    r.opt.mode = golden_mode(c);
    r.opt.effort = c["reasoning_effort"] == "max"    ? chat::ReasoningEffort::max
                   : c["reasoning_effort"] == "high" ? chat::ReasoningEffort::high
                                                     : chat::ReasoningEffort::none;
    r.opt.drop_thinking = c["drop_thinking"].get<bool>();
    r.opt.add_bos = c["add_bos"].get<bool>();
    return r;
}

}  // namespace aff_test
