// A multi-turn conversation over one backend sequence (see chat_session.hpp).
#include "libaff/runtime/chat_session.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/chat_tokens.hpp"
#include "libaff/runtime/end_tokens.hpp"

#include <algorithm>
#include <chrono>

namespace aff {

ChatSession::ChatSession(const ModelConfig& config, const tokenizer::Tokenizer& tokenizer, Sequence& sequence,
                         ChatSessionOptions options)
    : config_(config), tokenizer_(tokenizer), sequence_(sequence), options_(std::move(options)) {
    if (!options_.system.empty()) messages_.push_back({.role = "system", .content = options_.system});
    if (options_.context_size == 0) options_.context_size = std::size_t(std::max<std::int64_t>(0, config.max_position_embeddings));
    if (sequence_.position() != 0) sequence_.reset();
}

ChatTurnStats ChatSession::say(const std::string& user_text, const std::function<void(const std::string&)>& on_text) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<chat::Message> conversation = messages_;
    conversation.push_back({.role = "user", .content = user_text});
    const std::vector<std::int32_t> tokens =
        encode_chat_pieces(tokenizer_, chat::render_prompt_pieces(conversation, nullptr, chat::RenderOptions{}));
    check_tokens_in_vocabulary(std::size_t(config_.vocab_size), tokens, "chat");
    ChatTurnStats st;
    st.prompt_tokens = tokens.size();
    if (tokens.size() >= options_.context_size)
        throw_usage("the conversation is " + std::to_string(tokens.size()) + " tokens, which leaves no room for a reply in the context of " +
                    std::to_string(options_.context_size) + " tokens (-c)");

    const bool prefix = in_sequence_.size() < tokens.size() && std::equal(in_sequence_.begin(), in_sequence_.end(), tokens.begin());
    if (!prefix) {
        sequence_.reset();
        in_sequence_.clear();
    }
    st.reused_tokens = in_sequence_.size();

    GenerateOptions gen;
    gen.prompt.assign(tokens.begin() + std::ptrdiff_t(in_sequence_.size()), tokens.end());
    gen.max_new_tokens = std::min<std::size_t>(std::size_t(std::max(0, options_.max_new_tokens)),
                                               options_.context_size - tokens.size());
    if (!options_.ignore_eos) gen.is_end_token = config_end_tokens(config_);
    gen.sampling = options_.sampling;

    tokenizer::StreamDecoder decoder(tokenizer_);
    chat::StreamingParser parser(chat::ThinkingMode::chat);
    std::vector<std::int32_t> generated;
    GenerateHooks cb;
    cb.on_step = [&](const GenerationStep& step) {
        if (generated.empty())
            st.first_token_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        generated.push_back(step.token);
        const chat::StreamDelta d = parser.feed(decoder.push(step.token));
        if (!d.content.empty()) on_text(d.content);
        return true;
    };
    // Sampling advances with the conversation, so two turns with the same text differ.
    gen.sampling.seed += messages_.size();
    st.generation = generate(sequence_, gen, cb);
    chat::StreamDelta last = parser.feed(decoder.finish());
    const chat::StreamDelta tail = parser.finish();
    last.content += tail.content;
    if (!last.content.empty()) on_text(last.content);

    in_sequence_ = tokens;
    in_sequence_.insert(in_sequence_.end(), generated.begin(),
                        generated.begin() + std::ptrdiff_t(std::min(generated.size(), st.generation.decode_forwards)));
    st.reply = parser.result().content;
    messages_ = std::move(conversation);
    messages_.push_back({.role = "assistant", .content = st.reply});
    return st;
}

}  // namespace aff
