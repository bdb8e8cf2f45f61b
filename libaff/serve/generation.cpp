// The generation loop (see generation.hpp).
#include "libaff/serve/generation.hpp"

#include <algorithm>
#include <chrono>

namespace aff::serve {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

const char* to_string(FinishReason reason) {
    switch (reason) {
        case FinishReason::stop: return "stop";
        case FinishReason::length: return "length";
        case FinishReason::cancelled: return "cancelled";
    }
    return "stop";
}

std::string StopMatcher::push(std::string_view text, bool& hit) {
    hit = false;
    held_.append(text);
    if (stops_.empty()) return std::exchange(held_, {});
    std::size_t first = std::string::npos;
    for (const auto& s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        hit = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Hold back the longest suffix that is a prefix of some stop string.
    std::size_t keep = 0;
    for (const auto& s : stops_) {
        for (std::size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
            if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                keep = k;
                break;
            }
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() { return std::exchange(held_, {}); }

GenerationResult generate(Engine& engine, const std::vector<std::int32_t>& prompt, const GenerationParams& params,
                          const GenerationHooks& hooks) {
    GenerationResult result;
    result.prompt_tokens = prompt.size();
    if (hooks.cancelled && hooks.cancelled()) {
        result.finish = FinishReason::cancelled;
        return result;
    }
    Sampler sampler(params.sampling);
    auto text = engine.text_stream();
    StopMatcher stops(params.stop);
    StepLogprob lp;

    const auto t0 = Clock::now();
    std::span<const float> logits = engine.prefill(prompt);
    result.prompt_ms = ms_since(t0);
    result.cached_tokens = engine.cached_tokens();
    const auto t1 = Clock::now();

    auto emit = [&](GenerationStep& step) {
        result.text += step.text;
        return !hooks.on_step || hooks.on_step(step);
    };

    result.finish = FinishReason::length;
    std::vector<float> masked;
    while (result.completion_tokens < params.max_tokens) {
        std::int32_t token;
        if (params.constraint) {
            masked.assign(logits.begin(), logits.end());
            params.constraint->mask(masked);
            token = sampler.sample(masked);
            params.constraint->accept(token);
        } else {
            token = sampler.sample(logits);
        }
        ++result.completion_tokens;
        GenerationStep step;
        step.token = token;
        if (params.logprobs >= 0) {
            lp.token = token;
            lp.logprob = token_logprob(logits, token);
            lp.top = top_logprobs(logits, std::size_t(params.logprobs));
            step.logprob = &lp;
        }
        if (engine.is_end_token(token)) {
            step.text = stops.flush() + text->finish();
            emit(step);
            result.finish = FinishReason::stop;
            break;
        }
        bool hit = false;
        step.text = stops.push(text->push(token), hit);
        if (hit) {
            emit(step);
            result.finish = FinishReason::stop;
            break;
        }
        if (!emit(step)) {
            result.finish = FinishReason::cancelled;
            break;
        }
        if (result.completion_tokens == params.max_tokens) break;
        if (hooks.cancelled && hooks.cancelled()) {
            result.finish = FinishReason::cancelled;
            break;
        }
        logits = engine.decode(token);
    }
    if (result.finish == FinishReason::length) {
        // Out of budget: whatever was held back for a stop string is answer text.
        GenerationStep tail;
        tail.token = -1;
        bool hit = false;
        tail.text = stops.push(text->finish(), hit);
        if (!hit) tail.text += stops.flush();
        if (!tail.text.empty()) emit(tail);
    }
    result.decode_ms = ms_since(t1);
    // After the timing: the snapshot this may take is the cache's cost, not decoding's.
    engine.end_sequence();
    return result;
}

}  // namespace aff::serve
