// OpenAI request bodies (chat completions, completions) parsed and validated into
// plain structs. Anything a client could get wrong (malformed JSON, bad UTF-8, a
// field of the wrong type or out of range, an unknown role, n > 1) becomes an
// ApiError naming the field, which the server returns as HTTP 400 with OpenAI's
// {"error": {"message", "type", "param", "code"}} object. Fields this server does
// not act on but that clients routinely send (user, presence_penalty 0, ...) are
// accepted and ignored; fields whose meaning it cannot honour are rejected. The bodies
// of llama-server's /tokenize and /detokenize are read here too, with the same errors.
#pragma once

#include "libaff/runtime/json_grammar.hpp"
#include "libaff/serve/engine.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace aff::serve {

struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // empty = null
    std::string code;   // empty = null
    nlohmann::json to_json() const;
};

// Fields shared by both endpoints; unset optionals take the server's defaults.
struct SamplingRequest {
    std::optional<float> temperature;
    std::optional<float> top_p;
    std::optional<int> top_k;
    std::optional<float> min_p;
    std::optional<std::uint64_t> seed;
    std::optional<std::size_t> max_tokens;  // max_tokens or max_completion_tokens
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    int logprobs = -1;           // -1 none; else the number of top alternatives (0 = chosen only)
};

struct ChatRequest {
    std::string model;
    ChatPrompt prompt;
    SamplingRequest sampling;
    std::string tool_choice = "auto";  // auto, none, required, function
    std::string tool_choice_name;      // for "function"
    bool thinking_requested = false;   // the request said something about thinking
    // response_format json_object or json_schema: the grammar the reply is sampled under
    // (compiled here, once per request); null for text.
    std::shared_ptr<const JsonGrammar> grammar;
};

struct CompletionRequest {
    std::string model;
    bool prompt_is_tokens = false;
    std::string prompt_text;
    std::vector<std::int32_t> prompt_tokens;
    SamplingRequest sampling;
};

// llama-server's /tokenize and /detokenize bodies.
struct TokenizeRequest {
    std::string content;
    bool add_special = false;  // put the BOS token first
    bool with_pieces = false;  // each id with its text
};
struct DetokenizeRequest {
    std::vector<std::int32_t> tokens;
};

// `default_thinking` applies when the request says nothing about thinking.
std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view body, bool default_thinking);
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body);
std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body);
std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(std::string_view body);

// The prompt the model sees for a chat request: tool_choice "none" hides the tools, a
// named function shows only that one.
ChatPrompt prompt_shown(const ChatRequest& request);

// JSON is parsed recursively: a body nesting brackets 100 000 deep would overflow a
// connection thread's stack. Requests nesting deeper than this are refused before parsing.
constexpr std::size_t kMaxJsonDepth = 512;
// Does `text` (taken as JSON) nest arrays and objects at most `max_depth` deep? Counts
// brackets outside strings in one pass without parsing.
bool json_depth_within(std::string_view text, std::size_t max_depth);

// Is `text` well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF)?
bool valid_utf8(std::string_view text);

}  // namespace aff::serve
