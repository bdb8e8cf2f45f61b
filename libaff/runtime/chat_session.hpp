// aff-run's chat mode: a conversation with the model in its own chat encoding
// (libaff/tokenizer/chat.hpp), one user turn at a time. Each turn renders the whole
// conversation; when the tokens the sequence already holds are a prefix of it (the usual
// case) only the new tokens are run, otherwise the sequence starts again from the first
// token (an earlier reply that re-encodes to other ids than were generated). Replies are
// parsed as the server parses them, so no chat markup reaches the text shown.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/sequence.hpp"
#include "libaff/tokenizer/chat.hpp"
#include "libaff/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace aff {

struct ChatSessionOptions {
    std::string system;            // system message; empty: none
    int max_new_tokens = 512;      // per reply
    bool ignore_eos = false;
    SamplerParams sampling;
    std::size_t context_size = 0;  // tokens the conversation may reach (0 = the model's)
};

struct ChatTurnStats {
    std::size_t prompt_tokens = 0;   // the whole rendered conversation
    std::size_t reused_tokens = 0;   // of those, already in the sequence
    double first_token_seconds = 0;  // from the turn's start to its first generated token
    GenerateStats generation;
    std::string reply;               // the reply's text (content) as added to the conversation
};

class ChatSession {
public:
    ChatSession(const ModelConfig& config, const tokenizer::Tokenizer& tokenizer, Sequence& sequence,
                ChatSessionOptions options);

    // Adds the user's message, generates the reply and adds it. on_text receives the
    // reply's text as it becomes known. Throws aff::Error (usage) when the conversation
    // would not fit the context; the user's message is then not kept.
    ChatTurnStats say(const std::string& user_text, const std::function<void(const std::string&)>& on_text);

    const std::vector<chat::Message>& messages() const { return messages_; }

private:
    const ModelConfig& config_;
    const tokenizer::Tokenizer& tokenizer_;
    Sequence& sequence_;
    ChatSessionOptions options_;
    std::vector<chat::Message> messages_;
    std::vector<std::int32_t> in_sequence_;  // the tokens the sequence holds
};

}  // namespace aff
