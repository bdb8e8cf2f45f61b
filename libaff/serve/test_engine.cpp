// The scripted test engine (see test_engine.hpp for what it answers and why it
// exists). Everything here is deliberately simple and deterministic.
#include "aff/serve/test_engine.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace aff::serve {
namespace {

using nlohmann::json;

const std::string kThink = "<|think|>";
const std::string kNoThink = "<|nothink|>";
const std::string kAssistant = "<|assistant|>";
const std::string kEndThink = "</think>";
const std::string kCallsOpen = "\n\n<\xEF\xBD\x9C" "DSML\xEF\xBD\x9C" "tool_calls>";
const std::string kDsml = "\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";  // ｜DSML｜

// Longest suffix of `text` that is a proper prefix of `marker`.
std::size_t partial_suffix(std::string_view text, std::string_view marker) {
    for (std::size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k)
        if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
    return 0;
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

// Reads only what TestEngine writes: reasoning up to </think>, content up to the
// DSML block, then whole invoke/parameter tags.
class TestChatParser final : public ChatOutputParser {
public:
    explicit TestChatParser(bool thinking) : mode_(thinking ? Mode::reasoning : Mode::content) {}

    void feed(std::string_view text, std::vector<ChatEvent>& out) override {
        buf_.append(text);
        for (;;) {
            if (mode_ == Mode::reasoning || mode_ == Mode::content) {
                const std::string& marker = mode_ == Mode::reasoning ? kEndThink : kCallsOpen;
                const auto kind = mode_ == Mode::reasoning ? ChatEvent::Kind::reasoning : ChatEvent::Kind::content;
                const std::size_t at = buf_.find(marker);
                if (at == std::string::npos) {
                    const std::size_t keep = partial_suffix(buf_, marker);
                    if (buf_.size() > keep) out.push_back({kind, buf_.substr(0, buf_.size() - keep)});
                    buf_.erase(0, buf_.size() - keep);
                    return;
                }
                if (at > 0) out.push_back({kind, buf_.substr(0, at)});
                buf_.erase(0, at + marker.size());
                mode_ = mode_ == Mode::reasoning ? Mode::content : Mode::calls;
                continue;
            }
            if (mode_ == Mode::done) {
                buf_.clear();
                return;
            }
            if (!parse_tag(out)) return;
        }
    }

    void finish(std::vector<ChatEvent>& out) override {
        if (mode_ == Mode::reasoning && !buf_.empty()) out.push_back({ChatEvent::Kind::reasoning, buf_});
        if (mode_ == Mode::content && !buf_.empty()) out.push_back({ChatEvent::Kind::content, buf_});
        if (in_invoke_) {
            out.push_back({ChatEvent::Kind::tool_call_args, first_param_ ? "{}" : "}"});
            out.push_back({ChatEvent::Kind::tool_call_end, ""});
        }
        buf_.clear();
    }

private:
    enum class Mode { reasoning, content, calls, done };

    // Consumes one complete tag (with the line break after it); false if incomplete.
    bool parse_tag(std::vector<ChatEvent>& out) {
        std::size_t start = buf_.find('<');
        if (start == std::string::npos) {
            buf_.clear();
            return false;
        }
        buf_.erase(0, start);
        const std::string invoke = "<" + kDsml + "invoke name=\"";
        const std::string param = "<" + kDsml + "parameter name=\"";
        const std::string param_end = "</" + kDsml + "parameter>";
        const std::string invoke_end = "</" + kDsml + "invoke>";
        const std::string calls_end = "</" + kDsml + "tool_calls>";
        if (buf_.rfind(invoke, 0) == 0) {
            const std::size_t close = buf_.find("\">", invoke.size());
            if (close == std::string::npos) return false;
            out.push_back({ChatEvent::Kind::tool_call_begin, buf_.substr(invoke.size(), close - invoke.size())});
            in_invoke_ = true;
            first_param_ = true;
            buf_.erase(0, close + 2);
            return true;
        }
        if (buf_.rfind(param, 0) == 0) {
            const std::size_t end = buf_.find(param_end);
            if (end == std::string::npos) return false;
            const std::size_t name_end = buf_.find('"', param.size());
            const std::string name = buf_.substr(param.size(), name_end - param.size());
            const bool is_string = buf_.compare(name_end, 16, "\" string=\"true\">") == 0;
            const std::size_t value_at = buf_.find('>', name_end) + 1;
            const std::string value = buf_.substr(value_at, end - value_at);
            std::string frag = first_param_ ? "{" : ", ";
            frag += json(name).dump() + ": " + (is_string ? json(value).dump() : value);
            out.push_back({ChatEvent::Kind::tool_call_args, frag});
            first_param_ = false;
            buf_.erase(0, end + param_end.size());
            return true;
        }
        if (buf_.rfind(invoke_end, 0) == 0) {
            out.push_back({ChatEvent::Kind::tool_call_args, first_param_ ? "{}" : "}"});
            out.push_back({ChatEvent::Kind::tool_call_end, ""});
            in_invoke_ = false;
            buf_.erase(0, invoke_end.size());
            return true;
        }
        if (buf_.rfind(calls_end, 0) == 0) {
            mode_ = Mode::done;
            return true;
        }
        // A tag we do not know yet may still be arriving.
        if (buf_.size() < calls_end.size() + 32) return false;
        buf_.erase(0, 1);
        return true;
    }

    Mode mode_;
    std::string buf_;
    bool in_invoke_ = false;
    bool first_param_ = true;
};

std::string bytes_of(std::span<const std::int32_t> tokens) {
    std::string s;
    for (std::int32_t t : tokens)
        if (t >= 2 && t < 258) s += char(t - 2);
    return s;
}

}  // namespace

std::vector<std::int32_t> TestEngine::render_chat(const ChatPrompt& prompt) const {
    std::string text;
    if (!prompt.tools.empty()) text += "<|tools|>" + prompt.tools.dump() + "\n";
    for (const auto& m : prompt.messages) {
        text += "<|" + m.role + "|>";
        if (m.role == "assistant" && !m.reasoning_content.empty()) text += m.reasoning_content + kEndThink;
        text += m.content;
        for (const auto& c : m.tool_calls) text += "<|call|>" + c.name + " " + c.arguments;
    }
    text += kAssistant + (prompt.thinking ? kThink : kNoThink);
    return tokenize(text, true);
}

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
    return std::make_unique<TestChatParser>(prompt.thinking);
}

std::span<const float> TestEngine::prefill(std::span<const std::int32_t> tokens) {
    const std::string text = bytes_of(tokens);
    reply_.clear();
    endless_ = random_ = false;
    position_ = 0;
    count_next_ = 1;
    const bool thinking = text.size() >= kAssistant.size() + kThink.size() &&
                          text.compare(text.size() - kThink.size(), kThink.size(), kThink) == 0;
    const bool chat = thinking || (text.size() >= kNoThink.size() &&
                                   text.compare(text.size() - kNoThink.size(), kNoThink.size(), kNoThink) == 0);
    if (!chat) {
        if (text.find("count") != std::string::npos) endless_ = true;
        else reply_ = " echo: " + text;
        return next_logits();
    }
    const std::string body = text.substr(0, text.rfind(kAssistant));
    // The last message: the role marker that comes last.
    std::string role, content;
    std::size_t best = std::string::npos;
    for (const std::string r : {"user", "tool", "system", "developer", "assistant"}) {
        const std::string marker = "<|" + r + "|>";
        const std::size_t at = body.rfind(marker);
        if (at != std::string::npos && (best == std::string::npos || at > best)) {
            best = at;
            role = r;
            content = body.substr(at + marker.size());
        }
    }
    if (thinking) reply_ = "The user wrote " + std::to_string(content.size()) + " bytes." + kEndThink;
    if (role == "tool") {
        reply_ += "The tool returned: " + content;
    } else if (content.find("count") != std::string::npos) {
        endless_ = true;
    } else if (content.find("random") != std::string::npos) {
        random_ = true;
    } else if (body.rfind("<|tools|>", 0) == 0 && role == "user") {
        const json tools = json::parse(body.substr(9, body.find('\n') - 9), nullptr, false);
        std::string name = "tool", key = "input";
        bool is_string = true;
        if (tools.is_array() && !tools.empty()) {
            name = tools[0].value("name", "tool");
            const json props = tools[0].value("parameters", json::object()).value("properties", json::object());
            if (props.is_object() && !props.empty()) {
                key = props.begin().key();
                is_string = props.begin()->value("type", "string") == "string";
            }
        }
        const std::string value = is_string ? content : std::to_string(content.size());
        reply_ += kCallsOpen + "\n<" + kDsml + "invoke name=\"" + name + "\">\n<" + kDsml + "parameter name=\"" + key +
                  "\" string=\"" + (is_string ? "true" : "false") + "\">" + value + "</" + kDsml + "parameter>\n</" +
                  kDsml + "invoke>\n</" + kDsml + "tool_calls>";
    } else {
        reply_ += "You said: " + content;
    }
    return next_logits();
}

std::span<const float> TestEngine::decode(std::int32_t token) {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    ++position_;
    return next_logits();
}

std::span<const float> TestEngine::next_logits() {
    logits_.assign(258, 0.0f);
    if (random_ && position_ >= reply_.size()) {
        if (position_ >= reply_.size() + 24) {
            logits_[1] = 30.0f;
        } else {
            logits_.assign(258, -30.0f);
            for (int c = 'a'; c <= 'z'; ++c) logits_[std::size_t(c + 2)] = 0.0f;
        }
        return logits_;
    }
    while (endless_ && position_ >= reply_.size()) reply_ += std::to_string(count_next_++) + " ";
    if (position_ < reply_.size()) logits_[std::size_t(static_cast<unsigned char>(reply_[position_])) + 2] = 30.0f;
    else logits_[1] = 30.0f;
    return logits_;
}

}  // namespace aff::serve
