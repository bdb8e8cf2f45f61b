// OpenAI response objects: the streamed `chat.completion.chunk`s and the final
// `chat.completion` built from the same ChatEvents, so both modes say the same thing;
// tool calls are streamed as OpenAI does (a first delta with index, id, type and
// name and empty arguments, then argument fragments under the same index), and
// reasoning goes out as `reasoning_content`. Also usage, timings and logprobs.
#pragma once

#include "libaff/serve/engine.hpp"
#include "libaff/serve/generation.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace aff::serve {

// A fresh id such as "chatcmpl-3f9a..." (prefix + 24 random hex digits).
std::string random_id(const std::string& prefix);

class ChatReplyBuilder {
public:
    ChatReplyBuilder(std::string id, std::string model, std::int64_t created);

    // Deltas for these events, adjacent events of one kind merged, in order. Also
    // accumulates the final message.
    std::vector<nlohmann::json> deltas(const std::vector<ChatEvent>& events);
    // A whole chunk object around one delta.
    nlohmann::json chunk(nlohmann::json delta, const nlohmann::json& finish_reason = nullptr,
                         const nlohmann::json& logprobs = nullptr) const;
    // The final message: role, content (null when only tool calls), tool_calls,
    // reasoning_content (when there was any).
    nlohmann::json message() const;
    bool has_tool_calls() const { return !calls_.empty(); }
    // OpenAI's finish_reason for this reply.
    std::string finish_reason(FinishReason reason) const;

private:
    std::string id_, model_;
    std::int64_t created_;
    std::string content_, reasoning_;
    std::vector<ToolCall> calls_;
    bool in_call_ = false;
};

// OpenAI's usage, with prompt_tokens_details.cached_tokens (the prefix cache's share).
nlohmann::json usage_json(const GenerationResult& r);
// llama.cpp's `timings` object: cache_n (prompt tokens from the prefix cache), prompt_n
// (prompt tokens computed), prompt_ms, prompt_per_second, predicted_n, predicted_ms,
// predicted_per_second.
nlohmann::json timings_json(const GenerationResult& r);

// One entry of chat `logprobs.content`: token, logprob, bytes, top_logprobs.
nlohmann::json chat_logprob_entry(const Engine& engine, const StepLogprob& lp);

}  // namespace aff::serve
