// llama-server's utility endpoints, under the names and in the shapes llama-server gives
// them, so front ends written for it work here: /tokenize, /detokenize, /apply-template
// (a chat rendered to the prompt the model would see, as text and as ids) and /props
// (the model, its context and the server's settings). They use the engine's tokenizer
// and chat encoding only: no generation, no place in the queue.
#pragma once

#include "libaff/serve/engine.hpp"
#include "libaff/serve/openai_request.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace aff::serve {

// {"tokens": [ids]}, or with_pieces: {"tokens": [{"id", "piece"}]} (a piece that is not
// whole UTF-8 is given as its byte values, as llama-server does). Throws aff::Error
// (usage) for text the engine cannot encode.
nlohmann::json tokenize_reply(const Engine& engine, const TokenizeRequest& request);
// {"content": text}; the caller has checked the ids against the vocabulary.
nlohmann::json detokenize_reply(const Engine& engine, const DetokenizeRequest& request);
// {"prompt": text, "tokens": [ids]}. Throws aff::Error (usage) as render_chat does.
nlohmann::json apply_template_reply(const Engine& engine, const ChatPrompt& prompt);

// What /props reports besides the engine's own facts.
struct ServerSettings {
    std::string model_id;
    std::size_t context_size = 0;  // after --ctx-size
    float temperature = 1.0f;
    float top_p = 1.0f;
    bool thinking = false;
    std::size_t max_tokens_floor = 0;
    std::size_t queue_size = 0;
};
nlohmann::json props_reply(const Engine& engine, const ServerSettings& settings);

}  // namespace aff::serve
