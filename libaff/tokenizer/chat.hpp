// DeepSeek-V4 chat encoding (model-deepseek-v4.md §6): OpenAI-style messages rendered into
// the prompt text the model was trained on, and generated text parsed back into
// reasoning, content and tool calls, whole or while streaming. The rules and strings are
// those of DeepSeek's reference encoder encoding_dsv4.py, checked against its output in
// tests/data/chat/. Turning the prompt into ids is Tokenizer::encode_pieces's job: the
// reference pipeline encodes the whole prompt with special-token parsing, which lets a
// user's text forge turn markers; encoding the pieces keeps that text plain and gives the
// reference's ids for every prompt whose messages spell no special token.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aff::chat {

struct ToolCall {
    std::string id;              // OpenAI tool_call id; the model never writes one
    std::string name;
    std::string arguments_json;  // a JSON object as text
};

// One OpenAI-style message. Roles: system, developer, user, assistant, tool,
// latest_reminder.
struct Message {
    std::string role;
    std::string content;
    std::string reasoning;                 // assistant: reasoning_content
    std::vector<ToolCall> tool_calls;      // assistant
    std::string tool_call_id;              // tool: the call it answers
    nlohmann::ordered_json tools;          // system/developer: OpenAI tool list (null: none)
    nlohmann::ordered_json response_format;  // system/developer (null: none)
    bool without_eos = false;              // assistant: leave the turn open (prefill)
};

enum class ThinkingMode { chat, thinking };
enum class ReasoningEffort { none, high, max };  // high renders as none

struct RenderOptions {
    ThinkingMode mode = ThinkingMode::chat;
    ReasoningEffort effort = ReasoningEffort::none;
    bool drop_thinking = true;  // drop reasoning of turns before the last user message
    bool add_bos = true;        // false when continuing an already-encoded context
};

// A run of the rendered prompt: written by the template (markup: BOS, turn markers,
// think tags, DSML, the tools preamble) or taken from the request (text: message
// content, reasoning, tool names, arguments and schemas, response formats).
struct PromptPiece {
    std::string text;
    bool markup;
    bool operator==(const PromptPiece&) const = default;
};

// Renders `messages`. Request-level `tools` (an OpenAI tool list, or null) and
// `response_format` (or null) are attached to the first system message, or to an empty
// system message inserted in front when there is none; messages that carry their own
// `tools` make request-level tools an error. Throws aff::Error (usage) naming the message
// on input the encoder cannot render (unknown role, empty developer message).
std::string render_prompt(const std::vector<Message>& messages, const nlohmann::ordered_json& tools,
                          const RenderOptions& options,
                          const nlohmann::ordered_json& response_format = nullptr);
// The same prompt as pieces (their concatenation is render_prompt's string); adjacent
// pieces differ in kind and none is empty.
std::vector<PromptPiece> render_prompt_pieces(const std::vector<Message>& messages, const nlohmann::ordered_json& tools,
                                              const RenderOptions& options,
                                              const nlohmann::ordered_json& response_format = nullptr);

// Reads an OpenAI "messages" array. Content may be a string, null, or a list of
// {"type": "text"} parts (joined by "\n\n" for tool results, as the reference does,
// and without separator otherwise); tool_calls[].function.arguments a string or an
// object. Errors name the field ("messages[2].role: ...").
std::vector<Message> messages_from_openai(const nlohmann::ordered_json& messages);

struct ParsedCompletion {
    std::string reasoning;
    std::string content;
    std::vector<ToolCall> tool_calls;
    bool finished = false;   // the end-of-sentence token was seen
    bool malformed = false;  // a tool-call block could not be parsed (its text is in content)
    bool cut_short = false;  // the text ended inside a tool-call block (its unfinished part was dropped)
};

// Parses one generated assistant turn (text after the prompt, with or without the final
// <｜end▁of▁sentence｜>). Never throws on model output: a tool-call block keeps every
// complete call; the rest of a malformed block is returned as content, the unfinished
// rest of a block the text ends in (a reply cut by max_tokens) is dropped (cut_short).
// Equivalent to feeding the whole text to a StreamingParser and finishing it.
ParsedCompletion parse_completion(std::string_view text, ThinkingMode mode);

struct ToolCallDelta {
    std::size_t index;  // position in the turn's tool_calls
    ToolCall call;      // complete: name and the whole arguments object
};

struct StreamDelta {
    std::string reasoning;
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
    bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// Incremental form of parse_completion for streaming (SSE). feed() takes decoded text as
// it arrives and returns what can be told apart so far; text that may be the start of a
// marker (</think>, a tool-call block, end of sentence) is held back until it is decided.
// A tool call is emitted once its </｜DSML｜invoke> has arrived, whole, so a client never
// sees a call that later turns out malformed. Concatenating every delta gives result().
class StreamingParser {
public:
    explicit StreamingParser(ThinkingMode mode);
    StreamDelta feed(std::string_view text);
    StreamDelta finish();  // end of generation: flushes everything held back
    const ParsedCompletion& result() const { return result_; }

private:
    enum class State { start, reasoning, content, tool_calls, after_tool_calls, done };
    void step(bool final, StreamDelta& out);
    bool step_text(bool final, StreamDelta& out, bool reasoning);
    bool step_tool_calls(bool final, StreamDelta& out);
    void emit(StreamDelta& out, bool reasoning, std::string_view text);
    void give_up_block(StreamDelta& out);
    void drop_unfinished_block();

    ThinkingMode mode_;
    State state_ = State::start;
    std::string buf_;         // text not yet consumed
    std::string block_text_;  // raw text of the current tool-call block, for give_up_block
    std::size_t block_calls_ = 0;  // calls parsed from the current block
    bool no_tool_blocks_ = false;  // after a malformed block, everything else is content
    ParsedCompletion result_;
};

}  // namespace aff::chat
