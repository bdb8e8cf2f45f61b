// Building OpenAI response JSON (see openai_response.hpp).
#include "libaff/serve/openai_response.hpp"

#include <random>

namespace aff::serve {

using nlohmann::json;

std::string random_id(const std::string& prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* hex = "0123456789abcdef";
    std::string id = prefix;
    for (int i = 0; i < 24; ++i) id += hex[rng() & 15];
    return id;
}

ChatReplyBuilder::ChatReplyBuilder(std::string id, std::string model, std::int64_t created)
    : id_(std::move(id)), model_(std::move(model)), created_(created) {}

std::vector<json> ChatReplyBuilder::deltas(const std::vector<ChatEvent>& events) {
    std::vector<json> out;
    using K = ChatEvent::Kind;
    for (std::size_t i = 0; i < events.size();) {
        const ChatEvent& e = events[i];
        if (e.kind == K::tool_call_begin) {
            ToolCall call{random_id("call_"), e.text, ""};
            calls_.push_back(call);
            in_call_ = true;
            json fn = {{"name", call.name}, {"arguments", ""}};
            out.push_back({{"tool_calls", json::array({{{"index", calls_.size() - 1}, {"id", call.id},
                                                          {"type", "function"}, {"function", fn}}})}});
            ++i;
            continue;
        }
        if (e.kind == K::tool_call_end) {
            in_call_ = false;
            ++i;
            continue;
        }
        // Merge a run of text events of one kind.
        std::string text;
        std::size_t j = i;
        while (j < events.size() && events[j].kind == e.kind) text += events[j++].text;
        i = j;
        if (text.empty()) continue;
        if (e.kind == K::content) {
            content_ += text;
            out.push_back({{"content", text}});
        } else if (e.kind == K::reasoning) {
            reasoning_ += text;
            out.push_back({{"reasoning_content", text}});
        } else if (e.kind == K::tool_call_args && !calls_.empty()) {
            calls_.back().arguments += text;
            out.push_back({{"tool_calls", json::array({{{"index", calls_.size() - 1},
                                                         {"function", {{"arguments", text}}}}})}});
        }
    }
    return out;
}

json ChatReplyBuilder::chunk(json delta, const json& finish_reason, const json& logprobs) const {
    return {{"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", created_},
            {"model", model_},
            {"system_fingerprint", nullptr},
            {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", logprobs},
                                      {"finish_reason", finish_reason}}})}};
}

json ChatReplyBuilder::message() const {
    json m = {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}};
    if (!content_.empty() || calls_.empty()) m["content"] = content_;
    if (!reasoning_.empty()) m["reasoning_content"] = reasoning_;
    if (!calls_.empty()) {
        json calls = json::array();
        for (const auto& c : calls_)
            calls.push_back({{"id", c.id}, {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        m["tool_calls"] = calls;
    }
    return m;
}

std::string ChatReplyBuilder::finish_reason(FinishReason reason) const {
    if (reason == FinishReason::length) return "length";
    return calls_.empty() ? "stop" : "tool_calls";
}

json usage_json(const GenerationResult& r) {
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"total_tokens", r.prompt_tokens + r.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json timings_json(const GenerationResult& r) {
    auto rate = [](std::size_t n, double ms) { return ms > 0 ? double(n) * 1000.0 / ms : 0.0; };
    const std::size_t computed = r.prompt_tokens - r.cached_tokens;
    json t = {{"cache_n", r.cached_tokens},
              {"prompt_n", computed},
              {"prompt_ms", r.prompt_ms},
              {"prompt_per_second", rate(computed, r.prompt_ms)},
              {"predicted_n", r.completion_tokens},
              {"predicted_ms", r.decode_ms},
              {"predicted_per_second", rate(r.completion_tokens, r.decode_ms)}};
    if (r.drafting) {
        // llama.cpp's names for the totals; the rest is ours.
        t["draft_n"] = r.drafted_tokens;
        t["draft_n_accepted"] = r.accepted_tokens;
        t["draft_verify_n"] = r.verify_calls;
        t["draft_mean_accepted"] = r.verify_calls ? double(r.accepted_tokens) / double(r.verify_calls) : 0.0;
        json by_position = json::array();
        for (std::size_t i = 0; i < r.drafted_at.size(); ++i)
            by_position.push_back(r.drafted_at[i] ? double(r.accepted_at[i]) / double(r.drafted_at[i]) : 0.0);
        t["draft_acceptance_by_position"] = by_position;
    }
    return t;
}

json chat_logprob_entry(const Engine& engine, const StepLogprob& lp) {
    auto entry = [&](std::int32_t token, float logprob) {
        const std::string text = engine.token_text(token);
        json bytes = json::array();
        for (unsigned char c : text) bytes.push_back(int(c));
        return json{{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
    };
    json e = entry(lp.token, lp.logprob);
    json top = json::array();
    for (const auto& t : lp.top) top.push_back(entry(t.token, t.logprob));
    e["top_logprobs"] = top;
    return e;
}

}  // namespace aff::serve
