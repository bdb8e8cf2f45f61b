// The scripted test engine (see test_engine.hpp for what it answers and why it
// exists). Everything here is deliberately simple and deterministic.
#include "libaff/serve/test_engine.hpp"

#include "libaff/core/error.hpp"

#include "libaff/serve/dsv4_chat.hpp"
#include "libaff/tokenizer/dsv4_strings.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace aff::serve {
namespace {

using nlohmann::json;

namespace v4 = aff::chat::dsv4;
const std::string kAssistant(v4::assistant);
const std::string kUser(v4::user);
const std::string kThinkOpen = kAssistant + std::string(v4::think_start);
const std::string kThinkClosed = kAssistant + std::string(v4::think_end);
const std::string kDsml(v4::dsml);
const std::string kSchemas = "### Available Tool Schemas\n\n";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Length of the prefix of `bytes` that ends on a UTF-8 character boundary.
std::size_t complete_utf8(std::string_view bytes) {
    const std::size_t n = bytes.size();
    for (std::size_t back = 1; back <= std::min<std::size_t>(3, n); ++back) {
        const auto c = static_cast<unsigned char>(bytes[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        std::size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return back < need ? n - back : n;
    }
    return n;
}

class ByteTextStream final : public TokenTextStream {
public:
    std::string push(std::int32_t token) override {
        if (token >= 2 && token < 258) held_ += char(token - 2);
        const std::size_t n = complete_utf8(held_);
        std::string out = held_.substr(0, n);
        held_.erase(0, n);
        return out;
    }
    std::string finish() override { return std::exchange(held_, {}); }

private:
    std::string held_;
};

std::string bytes_of(std::span<const std::int32_t> tokens) {
    std::string s;
    for (std::int32_t t : tokens)
        if (t >= 2 && t < 258) s += char(t - 2);
    return s;
}

}  // namespace

std::vector<std::int32_t> TestEngine::render_chat(const ChatPrompt& prompt) const {
    // The real V4 prompt text (BOS written as text), one token per byte.
    return tokenize(render_chat_text(prompt), false);
}

std::string TestEngine::render_chat_text(const ChatPrompt& prompt) const { return render_dsv4_prompt(prompt); }

std::vector<std::int32_t> TestEngine::tokenize(std::string_view text, bool add_bos) const {
    std::vector<std::int32_t> out;
    if (add_bos) out.push_back(0);
    for (unsigned char c : text) out.push_back(std::int32_t(c) + 2);
    return out;
}

std::string TestEngine::token_text(std::int32_t token) const {
    if (token == 0) return "<bos>";
    if (token == 1) return "<end>";
    if (token >= 2 && token < 258) return std::string(1, char(token - 2));
    return {};
}

std::unique_ptr<TokenTextStream> TestEngine::text_stream() const { return std::make_unique<ByteTextStream>(); }

std::unique_ptr<ChatOutputParser> TestEngine::chat_parser(const ChatPrompt& prompt) const {
    return make_dsv4_parser(prompt.thinking);
}

namespace {

// The test engine's sequence (test_engine.hpp): a script, not a model.
class ScriptedSequence final : public Sequence {
public:
    explicit ScriptedSequence(int delay_ms) : delay_ms_(delay_ms) {}
    std::string describe() const override { return "the scripted test engine"; }
    std::size_t vocab_size() const override { return 258; }
    std::int64_t position() const override { return position_; }
    void reset() override { position_ = 0; }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override;

private:
    // Picks the reply from the prompt.
    void script(std::span<const std::int32_t> tokens);
    std::vector<float> next_logits();

    int delay_ms_;
    std::int64_t position_ = 0;
    std::string reply_;      // scripted reply bytes
    bool endless_ = false;   // "count": extend the reply forever
    bool random_ = false;    // "random": flat logits over letters
    bool json_ = false;      // structured output: logits that lean towards closing brackets
    std::size_t reply_at_ = 0;
    std::size_t count_next_ = 1;
};

}  // namespace

TestEngine::TestEngine(std::size_t context_size, int delay_ms)
    : context_size_(context_size), sequence_(std::make_unique<ScriptedSequence>(delay_ms)) {}

TestEngine::~TestEngine() = default;

void ScriptedSequence::script(std::span<const std::int32_t> tokens) {
    const std::string text = bytes_of(tokens);
    reply_.clear();
    endless_ = random_ = json_ = false;
    reply_at_ = 0;
    count_next_ = 1;
    const bool thinking = ends_with(text, kThinkOpen);
    if (!thinking && !ends_with(text, kThinkClosed)) {  // not a chat prompt: /v1/completions
        if (text.find("count") != std::string::npos) endless_ = true;
        else reply_ = " echo: " + text;
        return;
    }
    // The last user turn: after the last <｜User｜>, up to the generation prefix. Tool
    // results arrive there as <tool_result>...</tool_result> blocks.
    const std::size_t user_at = text.rfind(kUser);
    const std::size_t end = text.size() - (thinking ? kThinkOpen : kThinkClosed).size();
    std::string content = user_at == std::string::npos ? "" : text.substr(user_at + kUser.size(), end - user_at - kUser.size());
    const std::string result_open(v4::tool_result_open), result_close(v4::tool_result_close);
    const bool tool_result = content.rfind(result_open, 0) == 0;
    if (tool_result) content = content.substr(result_open.size(), content.find(result_close) - result_open.size());
    if (thinking) reply_ = "The user wrote " + std::to_string(content.size()) + " bytes." + std::string(v4::think_end);
    const std::size_t schemas = text.find(kSchemas);
    if (text.find(v4::response_format_head) != std::string::npos) {
        json_ = true;  // structured output: the constraint decides; next_logits only leans
    } else if (tool_result) {
        reply_ += "The tool returned: " + content;
    } else if (content.find("count") != std::string::npos) {
        endless_ = true;
    } else if (content.find("random") != std::string::npos) {
        random_ = true;
    } else if (schemas != std::string::npos) {
        // The first tool's schema is the first line after the heading.
        const std::size_t from = schemas + kSchemas.size();
        const json tool = json::parse(text.substr(from, text.find('\n', from) - from), nullptr, false);
        std::string name = "tool", key = "input";
        bool is_string = true;
        if (tool.is_object()) {
            name = tool.value("name", "tool");
            const json props = tool.value("parameters", json::object()).value("properties", json::object());
            if (props.is_object() && !props.empty()) {
                key = props.begin().key();
                is_string = props.begin()->value("type", "string") == "string";
            }
        }
        const std::string value = is_string ? content : std::to_string(content.size());
        reply_ += "\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"" + name + "\">\n<" + kDsml +
                  "parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">" + value + "</" +
                  kDsml + "parameter>\n</" + kDsml + "invoke>\n</" + kDsml + "tool_calls>";
    } else {
        reply_ += "You said: " + content;
    }
}

std::vector<float> ScriptedSequence::forward(std::span<const std::int32_t> tokens, bool all_logits) {
    if (all_logits && tokens.size() > 1) throw_unsupported("the test engine gives the last position's logits only");
    if (position_ == 0) {
        script(tokens);
    } else {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
            ++reply_at_;
        }
    }
    position_ += static_cast<std::int64_t>(tokens.size());
    return next_logits();
}

std::vector<float> ScriptedSequence::next_logits() {
    std::vector<float> logits(258, 0.0f);
    if (json_ && reply_at_ >= reply_.size()) {
        // Leans towards closing what is open, so that a constrained walk over a schema ends
        // soon: the grammar's mask picks among these, the seed among equals.
        auto lean = [&](char c, float v) { logits[std::size_t(static_cast<unsigned char>(c)) + 2] = v; };
        for (char c : std::string("}]\"")) lean(c, 6.0f);
        for (char c = '0'; c <= '9'; ++c) lean(c, 2.0f);
        for (char c : std::string(",:{[")) lean(c, 1.0f);
        for (char c : std::string(" \n\t\r")) lean(c, -3.0f);
        logits[1] = 8.0f;  // end of turn, once the value is whole
        return logits;
    }
    if (random_ && reply_at_ >= reply_.size()) {
        if (reply_at_ >= reply_.size() + 24) {
            logits[1] = 30.0f;
        } else {
            logits.assign(258, -30.0f);
            for (int c = 'a'; c <= 'z'; ++c) logits[std::size_t(c + 2)] = 0.0f;
        }
        return logits;
    }
    while (endless_ && reply_at_ >= reply_.size()) reply_ += std::to_string(count_next_++) + " ";
    if (reply_at_ < reply_.size()) logits[std::size_t(static_cast<unsigned char>(reply_[reply_at_])) + 2] = 30.0f;
    else logits[1] = 30.0f;
    return logits;
}

}  // namespace aff::serve
