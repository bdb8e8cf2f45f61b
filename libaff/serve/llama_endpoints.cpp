// llama-server's utility endpoints (see llama_endpoints.hpp).
#include "libaff/serve/llama_endpoints.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace aff::serve {

using nlohmann::json;

namespace {

// A float setting as it was written (0.6, not 0.6000000238418579).
double as_written(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(v));
    return std::strtod(buf, nullptr);
}

}  // namespace

json tokenize_reply(const Engine& engine, const TokenizeRequest& request) {
    const std::vector<std::int32_t> ids = engine.tokenize(request.content, request.add_special);
    json tokens = json::array();
    for (std::int32_t id : ids) {
        if (!request.with_pieces) {
            tokens.push_back(id);
            continue;
        }
        const std::string piece = engine.token_text(id);
        json p = piece;
        if (!valid_utf8(piece)) {
            p = json::array();
            for (unsigned char c : piece) p.push_back(int(c));
        }
        tokens.push_back({{"id", id}, {"piece", p}});
    }
    return {{"tokens", tokens}};
}

json detokenize_reply(const Engine& engine, const DetokenizeRequest& request) {
    std::unique_ptr<TokenTextStream> stream = engine.text_stream();
    std::string text;
    for (std::int32_t id : request.tokens) text += stream->push(id);
    text += stream->finish();
    return {{"content", text}};
}

json apply_template_reply(const Engine& engine, const ChatPrompt& prompt) {
    return {{"prompt", engine.render_chat_text(prompt)}, {"tokens", engine.render_chat(prompt)}};
}

json props_reply(const Engine& engine, const ServerSettings& s) {
    const json params = {{"temperature", as_written(s.temperature)}, {"top_p", as_written(s.top_p)}, {"top_k", 0}, {"min_p", 0.0},
                         {"n_predict", -1}, {"thinking", s.thinking}, {"max_tokens_floor", s.max_tokens_floor}};
    return {{"default_generation_settings", {{"n_ctx", s.context_size}, {"params", params}}},
            {"total_slots", 1},
            {"model_alias", s.model_id},
            {"model_path", engine.model_path()},
            {"n_ctx", s.context_size},
            {"n_vocab", engine.vocab_size()},
            {"queue_size", s.queue_size},
            {"modalities", {{"vision", false}, {"audio", false}}},
            {"build_info", std::string("aff ") + AFF_VERSION}};
}

}  // namespace aff::serve
