// The seam between the server and whatever generates tokens. The server (HTTP, the
// OpenAI mapping, queueing, streaming) is written against this interface only, so the CPU
// reference model, the GPU path and the scripted test engine (test_engine.hpp) all serve
// the same API with no change to it.
//
// An Engine does four jobs: turn a chat into prompt tokens (the model's chat encoding),
// hold the one sequence the generation loop runs (libaff/runtime/sequence.hpp; generation.hpp
// resets it for every request), turn generated tokens back into text, and split the text of a
// chat reply into reasoning, content and tool calls. One sequence at a time: the server
// serialises calls (scheduler.hpp), so implementations need no locking of their own.
#pragma once

#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/sequence.hpp"
#include "libaff/runtime/text_stream.hpp"
#include "libaff/serve/prefix_cache.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aff::serve {

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text, as OpenAI sends it
};

// One message of an OpenAI chat, already validated (openai_request.hpp).
struct ChatMessage {
    std::string role;  // system, developer, user, assistant, tool
    std::string content;
    std::string reasoning_content;     // assistant turns from a thinking model
    std::vector<ToolCall> tool_calls;  // assistant
    std::string tool_call_id;          // tool
    std::string name;
};

struct ChatPrompt {
    std::vector<ChatMessage> messages;
    // The request's OpenAI tool list ({"type": "function", "function": {...}}), in the
    // client's key order: the model sees the schemas as the client wrote them.
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    bool thinking = false;
    std::string reasoning_effort;  // "", "low", "medium", "high", "max"
    // The request's response_format when it asks for JSON (rendered into the system
    // message, as the chat encoding does); null otherwise.
    nlohmann::ordered_json response_format = nullptr;
};

// Pieces of a chat reply as the text streams in.
struct ChatEvent {
    enum class Kind {
        reasoning,       // text: more reasoning
        content,         // text: more answer
        tool_call_begin, // text: function name
        tool_call_args,  // text: more of the arguments JSON
        tool_call_end,
    };
    Kind kind;
    std::string text;
    bool operator==(const ChatEvent&) const = default;
};

class ChatOutputParser {
public:
    virtual ~ChatOutputParser() = default;
    // Appends the events that `text` completes; text that may still turn out to be
    // markup is held back until more arrives or finish() is called.
    virtual void feed(std::string_view text, std::vector<ChatEvent>& out) = 0;
    virtual void finish(std::vector<ChatEvent>& out) = 0;
};

class Engine {
public:
    virtual ~Engine() = default;

    virtual std::string model_id() const = 0;
    virtual std::size_t context_size() const = 0;
    virtual std::size_t vocab_size() const = 0;

    // Where the model was loaded from (/props); empty when there is no such path.
    virtual std::string model_path() const { return {}; }

    // Throws aff::Error (usage) for content the encoding cannot express.
    virtual std::vector<std::int32_t> render_chat(const ChatPrompt& prompt) const = 0;
    // The same prompt as text (/apply-template): the chat encoding's markup as written.
    virtual std::string render_chat_text(const ChatPrompt& prompt) const = 0;
    // Plain text (no chat markup) for /v1/completions; `add_bos` at the very start.
    virtual std::vector<std::int32_t> tokenize(std::string_view text, bool add_bos) const = 0;
    // The text of one token as logprobs report it (may be part of a UTF-8 character).
    virtual std::string token_text(std::int32_t token) const = 0;
    virtual std::unique_ptr<TokenTextStream> text_stream() const = 0;
    virtual std::unique_ptr<ChatOutputParser> chat_parser(const ChatPrompt& prompt) const = 0;
    // End of turn: generation stops here and the token adds no text.
    virtual bool is_end_token(std::int32_t token) const = 0;

    // The sequence generations run on: reset, then its first forward is the prompt, then one
    // token a call. Its logits are those the server samples from.
    virtual Sequence& sequence() = 0;
    // The generation on this sequence is over (finished, cut off or cancelled): an engine
    // with a prefix cache snapshots the state here, for a next turn that resends it all.
    virtual void end_sequence() {}

    // The drafter generations on sequence() use for speculative decoding; null: none.
    virtual Drafter* drafter() { return nullptr; }
    // The generation loop is about to make this forward call or rewind on sequence()
    // (generate.hpp's before_dispatch): an engine recording a route trace labels it.
    virtual void before_dispatch(const Dispatch& dispatch) { (void)dispatch; }

    // Prompt tokens the last prompt took from the prefix cache instead of computing them.
    virtual std::size_t cached_tokens() const { return 0; }
    // The prefix cache's counters, or nothing when this engine has none. Safe to call from
    // any thread (the /metrics scrape), unlike the calls above.
    virtual std::optional<PrefixCacheStats> prefix_cache_stats() const { return std::nullopt; }
    // The expert tiers' counters (libaff/runtime/tier_stats.hpp) as of the last forward, or
    // nothing when the experts are not tiered. Safe to call from any thread.
    virtual std::optional<TierStats> tier_stats() const { return std::nullopt; }
};

}  // namespace aff::serve
