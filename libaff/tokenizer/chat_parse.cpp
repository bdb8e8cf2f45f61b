// Parsing generated DeepSeek-V4 text (see chat.hpp). One state machine serves both the
// streaming and the one-shot parser, so they cannot disagree. On well-formed text it gives
// what the reference encoder's parse_message_from_completion_text gives; where the
// reference raises on malformed text, this keeps every complete tool call and returns the
// rest as content, flagging `malformed`. Both DSML spellings, full-width "｜DSML｜" and
// ASCII "|DSML|", are accepted in every tag.
#include "libaff/tokenizer/chat.hpp"
#include "libaff/tokenizer/dsv4_strings.hpp"
#include "libaff/tokenizer/py_json.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace aff::chat {
namespace {

std::string tag(std::string_view before, std::string_view dsml, std::string_view after) {
    return std::string(before) + std::string(dsml) + std::string(after);
}

struct Tags {
    std::array<std::string, 2> block_open, block_close, invoke_open, invoke_close, param_open, param_close;
    Tags() {
        std::array<std::string_view, 2> d{dsv4::dsml, dsv4::dsml_ascii};
        for (int i = 0; i < 2; ++i) {
            block_open[i] = tag("<", d[i], "tool_calls>");
            block_close[i] = tag("</", d[i], "tool_calls>");
            invoke_open[i] = tag("<", d[i], "invoke");
            invoke_close[i] = tag("</", d[i], "invoke>");
            param_open[i] = tag("<", d[i], "parameter");
            param_close[i] = tag("</", d[i], "parameter>");
        }
    }
};

const Tags& tags() {
    static const Tags t;
    return t;
}

bool starts_with_any(std::string_view s, const std::array<std::string, 2>& xs, std::size_t& len) {
    for (const auto& x : xs)
        if (s.substr(0, x.size()) == x) {
            len = x.size();
            return true;
        }
    return false;
}

// True when `s` is a proper prefix of one of `xs` (more text could complete it).
bool could_become(std::string_view s, const std::array<std::string, 2>& xs) {
    for (const auto& x : xs)
        if (s.size() < x.size() && std::string_view(x).substr(0, s.size()) == s) return true;
    return false;
}

// Earliest occurrence of any of `xs` in s; npos when none.
std::size_t find_any(std::string_view s, const std::array<std::string, 2>& xs, std::size_t& len) {
    std::size_t best = std::string_view::npos;
    for (const auto& x : xs) {
        std::size_t p = s.find(x);
        if (p < best) {
            best = p;
            len = x.size();
        }
    }
    return best;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::size_t skip_space(std::string_view s, std::size_t i) {
    while (i < s.size() && is_space(s[i])) ++i;
    return i;
}

// Reads `key="value"` at i (after optional white space); false if absent.
bool read_attribute(std::string_view s, std::size_t& i, std::string_view key, std::string& value) {
    std::size_t j = skip_space(s, i);
    if (s.substr(j, key.size()) != key || s.substr(j + key.size(), 2) != "=\"") return false;
    j += key.size() + 2;
    std::size_t end = s.find('"', j);
    if (end == std::string_view::npos) return false;
    value = std::string(s.substr(j, end - j));
    i = end + 1;
    return true;
}

bool is_json(std::string_view text) {
    return nlohmann::json::accept(text.begin(), text.end());
}

// One whole <DSML invoke ...>...</DSML invoke>; nullopt when malformed.
std::optional<ToolCall> parse_invoke(std::string_view s) {
    const Tags& t = tags();
    std::size_t len = 0, i = 0;
    if (!starts_with_any(s, t.invoke_open, len)) return std::nullopt;
    i = len;
    ToolCall call;
    if (!read_attribute(s, i, "name", call.name)) return std::nullopt;
    i = skip_space(s, i);
    if (i >= s.size() || s[i] != '>') return std::nullopt;
    ++i;
    struct Param {
        std::string key, value;
        std::optional<bool> is_string;
    };
    std::vector<Param> params;
    while (true) {
        i = skip_space(s, i);
        if (starts_with_any(s.substr(i), t.invoke_close, len)) {
            if (i + len != s.size()) return std::nullopt;
            break;
        }
        if (!starts_with_any(s.substr(i), t.param_open, len)) return std::nullopt;
        i += len;
        Param p;
        if (!read_attribute(s, i, "name", p.key)) return std::nullopt;
        std::string flag;
        std::size_t j = i;
        if (read_attribute(s, j, "string", flag)) {
            if (flag != "true" && flag != "false") return std::nullopt;
            p.is_string = flag == "true";
            i = j;
        }
        i = skip_space(s, i);
        if (i >= s.size() || s[i] != '>') return std::nullopt;
        ++i;
        std::size_t close = find_any(s.substr(i), t.param_close, len);
        if (close == std::string_view::npos) return std::nullopt;
        p.value = std::string(s.substr(i, close));
        i += close + len;
        auto same = std::find_if(params.begin(), params.end(), [&](const Param& q) { return q.key == p.key; });
        if (same != params.end()) *same = std::move(p);  // a repeated name: the last value wins
        else params.push_back(std::move(p));
    }
    // The reference rebuilds the arguments as text: string values JSON-quoted, others
    // inserted as written. A value marked (or left unmarked) as non-string that is not
    // valid JSON is quoted instead, so the arguments are always a JSON object.
    std::string json = "{";
    for (std::size_t k = 0; k < params.size(); ++k) {
        if (k) json += ", ";
        json += aff::tokenizer::py_json_quote(params[k].key) + ": ";
        bool raw = params[k].is_string == std::optional<bool>(false) || !params[k].is_string.has_value();
        if (raw && is_json(params[k].value)) json += params[k].value;
        else json += aff::tokenizer::py_json_quote(params[k].value);
    }
    json += "}";
    call.arguments_json = std::move(json);
    return call;
}

// Length of the longest suffix of s that is a proper prefix of one of the markers.
std::size_t partial_marker_suffix(std::string_view s, const std::vector<std::string_view>& markers) {
    std::size_t best = 0;
    for (std::string_view m : markers) {
        for (std::size_t k = std::min(s.size(), m.size() - 1); k > best; --k)
            if (s.substr(s.size() - k) == m.substr(0, k)) {
                best = k;
                break;
            }
    }
    return best;
}

}  // namespace

StreamingParser::StreamingParser(ThinkingMode mode) : mode_(mode) {}

void StreamingParser::emit(StreamDelta& out, bool reasoning, std::string_view text) {
    if (text.empty()) return;
    (reasoning ? out.reasoning : out.content) += text;
    (reasoning ? result_.reasoning : result_.content) += text;
}

StreamDelta StreamingParser::feed(std::string_view text) {
    StreamDelta out;
    if (state_ == State::done) return out;
    buf_ += text;
    step(false, out);
    return out;
}

StreamDelta StreamingParser::finish() {
    StreamDelta out;
    step(true, out);
    buf_.clear();
    state_ = State::done;
    return out;
}

void StreamingParser::step(bool final, StreamDelta& out) {
    while (true) {
        switch (state_) {
            case State::start: {
                if (mode_ == ThinkingMode::chat) {
                    state_ = State::content;
                    break;
                }
                // The prompt already opened <think>; a model that repeats it is forgiven.
                std::string_view open = dsv4::think_start;
                if (!final && buf_.size() < open.size() && open.substr(0, buf_.size()) == buf_) return;
                if (std::string_view(buf_).substr(0, open.size()) == open) buf_.erase(0, open.size());
                state_ = State::reasoning;
                break;
            }
            case State::reasoning:
                if (!step_text(final, out, true)) return;
                break;
            case State::content:
                if (!step_text(final, out, false)) return;
                break;
            case State::tool_calls:
                if (!step_tool_calls(final, out)) return;
                break;
            case State::after_tool_calls: {
                // White space before the end of sentence is dropped, as the reference does.
                std::size_t i = skip_space(buf_, 0);
                std::string_view rest = std::string_view(buf_).substr(i);
                std::string_view eos = dsv4::eos;
                if (rest.empty()) {
                    if (final) buf_.clear();
                    return;
                }
                if (rest.substr(0, eos.size()) == eos) {
                    result_.finished = true;
                    state_ = State::done;
                    buf_.clear();
                    return;
                }
                if (!final && eos.substr(0, rest.size()) == rest) return;
                // Other text after the block: the reference rejects it; keep it as content.
                no_tool_blocks_ = true;
                state_ = State::content;
                break;
            }
            case State::done:
                buf_.clear();
                return;
        }
    }
}

// Reasoning or content: runs until </think> (reasoning only), a tool-call block or EOS.
// Returns true when the state changed and stepping should go on.
bool StreamingParser::step_text(bool final, StreamDelta& out, bool reasoning) {
    const Tags& t = tags();
    std::vector<std::string_view> markers{dsv4::eos};
    if (reasoning) markers.push_back(dsv4::think_end);
    if (!no_tool_blocks_) {
        markers.push_back(t.block_open[0]);
        markers.push_back(t.block_open[1]);
    }
    std::size_t at = std::string::npos;
    std::string_view hit;
    for (std::string_view m : markers) {
        std::size_t p = buf_.find(m);
        if (p < at) {
            at = p;
            hit = m;
        }
    }
    if (at != std::string::npos) {
        std::size_t text_end = at;
        bool block = hit == t.block_open[0] || hit == t.block_open[1];
        if (block) {  // the blank line before a block belongs to the block
            for (int k = 0; k < 2 && text_end > 0 && buf_[text_end - 1] == '\n'; ++k) --text_end;
        }
        emit(out, reasoning, std::string_view(buf_).substr(0, text_end));
        if (block) {
            block_text_ = buf_.substr(text_end, at + hit.size() - text_end);
            block_calls_ = 0;
            state_ = State::tool_calls;
        } else if (hit == dsv4::think_end) {
            state_ = State::content;
        } else {
            result_.finished = true;
            state_ = State::done;
        }
        buf_.erase(0, at + hit.size());
        return true;
    }
    if (final) {
        emit(out, reasoning, buf_);
        buf_.clear();
        return false;
    }
    std::size_t hold = partial_marker_suffix(buf_, markers);
    if (!no_tool_blocks_)
        for (int k = 0; k < 2 && hold < buf_.size() && buf_[buf_.size() - hold - 1] == '\n'; ++k) ++hold;
    emit(out, reasoning, std::string_view(buf_).substr(0, buf_.size() - hold));
    buf_.erase(0, buf_.size() - hold);
    return false;
}

bool StreamingParser::step_tool_calls(bool final, StreamDelta& out) {
    const Tags& t = tags();
    while (true) {
        std::size_t ws = skip_space(buf_, 0);
        block_text_ += buf_.substr(0, ws);
        buf_.erase(0, ws);
        std::size_t len = 0;
        if (starts_with_any(buf_, t.block_close, len)) {
            block_text_.clear();
            buf_.erase(0, len);
            state_ = State::after_tool_calls;
            return true;
        }
        if (starts_with_any(buf_, t.invoke_open, len)) {
            std::size_t close = find_any(buf_, t.invoke_close, len);
            std::size_t eos = buf_.find(dsv4::eos);
            if (eos < close) {  // the model ended its turn inside the invoke
                give_up_block(out);
                return true;
            }
            if (close == std::string::npos) {
                if (!final) return false;  // wait for the rest of the invoke
                drop_unfinished_block();
                return true;
            }
            std::optional<ToolCall> call = parse_invoke(std::string_view(buf_).substr(0, close + len));
            if (!call) {
                give_up_block(out);
                return true;
            }
            std::size_t index = result_.tool_calls.size();
            result_.tool_calls.push_back(*call);
            out.tool_calls.push_back(ToolCallDelta{index, std::move(*call)});
            ++block_calls_;
            block_text_ += buf_.substr(0, close + len);
            buf_.erase(0, close + len);
            continue;
        }
        if (buf_.empty() || could_become(buf_, t.block_close) || could_become(buf_, t.invoke_open)) {
            if (!final) return false;
            drop_unfinished_block();
            return true;
        }
        give_up_block(out);
        return true;
    }
}

// Generation ended (the token budget) inside a block that was well formed so far: its
// complete calls stay, and the unfinished rest is dropped rather than handed on as
// content, where a client would show raw DSML markup.
void StreamingParser::drop_unfinished_block() {
    result_.cut_short = true;
    block_text_.clear();
    buf_.clear();
    state_ = State::done;
}

// A block that cannot be parsed: its complete calls stay, the rest is content (all of
// it, from the blank line before the block, when no call was complete), and no further
// tool-call blocks are looked for.
void StreamingParser::give_up_block(StreamDelta& out) {
    result_.malformed = true;
    std::string text = block_calls_ == 0 ? block_text_ + buf_ : buf_;
    block_text_.clear();
    buf_ = std::move(text);
    no_tool_blocks_ = true;
    state_ = State::content;
}

ParsedCompletion parse_completion(std::string_view text, ThinkingMode mode) {
    StreamingParser parser(mode);
    parser.feed(text);
    parser.finish();
    return parser.result();
}

}  // namespace aff::chat
