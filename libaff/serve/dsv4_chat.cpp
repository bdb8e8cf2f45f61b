// Adapters from serve's chat types to libaff/tokenizer's V4 encoder and parser (see
// dsv4_chat.hpp).
#include "libaff/serve/dsv4_chat.hpp"

namespace aff::serve {
namespace {

class Dsv4ChatParser final : public ChatOutputParser {
public:
    explicit Dsv4ChatParser(bool thinking)
        : parser_(thinking ? chat::ThinkingMode::thinking : chat::ThinkingMode::chat) {}

    void feed(std::string_view text, std::vector<ChatEvent>& out) override { convert(parser_.feed(text), out); }
    void finish(std::vector<ChatEvent>& out) override { convert(parser_.finish(), out); }

private:
    static void convert(const chat::StreamDelta& d, std::vector<ChatEvent>& out) {
        if (!d.reasoning.empty()) out.push_back({ChatEvent::Kind::reasoning, d.reasoning});
        if (!d.content.empty()) out.push_back({ChatEvent::Kind::content, d.content});
        for (const auto& call : d.tool_calls) {
            out.push_back({ChatEvent::Kind::tool_call_begin, call.call.name});
            out.push_back({ChatEvent::Kind::tool_call_args, call.call.arguments_json});
            out.push_back({ChatEvent::Kind::tool_call_end, ""});
        }
    }

    chat::StreamingParser parser_;
};

}  // namespace

std::vector<chat::PromptPiece> render_dsv4_pieces(const ChatPrompt& prompt) {
    std::vector<chat::Message> messages;
    messages.reserve(prompt.messages.size());
    for (const auto& m : prompt.messages) {
        chat::Message c;
        c.role = m.role;
        c.content = m.content;
        c.reasoning = m.reasoning_content;
        c.tool_call_id = m.tool_call_id;
        for (const auto& t : m.tool_calls) c.tool_calls.push_back({t.id, t.name, t.arguments});
        messages.push_back(std::move(c));
    }
    chat::RenderOptions options;
    options.mode = prompt.thinking ? chat::ThinkingMode::thinking : chat::ThinkingMode::chat;
    options.effort = prompt.reasoning_effort == "max" ? chat::ReasoningEffort::max : chat::ReasoningEffort::none;
    const nlohmann::ordered_json tools = prompt.tools.empty() ? nlohmann::ordered_json(nullptr) : prompt.tools;
    return chat::render_prompt_pieces(messages, tools, options, prompt.response_format);
}

std::string render_dsv4_prompt(const ChatPrompt& prompt) {
    std::string text;
    for (const chat::PromptPiece& p : render_dsv4_pieces(prompt)) text += p.text;
    return text;
}

std::unique_ptr<ChatOutputParser> make_dsv4_parser(bool thinking) { return std::make_unique<Dsv4ChatParser>(thinking); }

}  // namespace aff::serve
