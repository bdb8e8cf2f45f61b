// One generation: prefill the prompt, then sample and decode token by token until
// an end token, a stop string, the token budget, or cancellation (a client that went
// away: checked before every decode step, so at most one more token is computed).
// Text is released as soon as it can no longer turn into a stop string; the stop
// string itself is never released. Timings are measured here so every endpoint
// reports them the same way.
#pragma once

#include "libaff/runtime/sampler.hpp"
#include "libaff/runtime/token_constraint.hpp"
#include "libaff/serve/engine.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aff::serve {

struct GenerationParams {
    std::size_t max_tokens = 16;
    SamplerParams sampling;
    std::vector<std::string> stop;
    int logprobs = -1;  // -1 none; k >= 0: the chosen token's logprob plus the top k
    // Structured output or a forced tool call: masks the logits before each sample
    // (logprobs still report the model's own distribution). Null: unconstrained.
    std::shared_ptr<TokenConstraint> constraint;
};

struct StepLogprob {
    std::int32_t token = 0;
    float logprob = 0.0f;
    std::vector<TokenLogprob> top;
};

// What one step adds. `text` may be empty (an unfinished character, text held back
// for a possible stop string) and may carry text of earlier tokens.
struct GenerationStep {
    std::int32_t token = 0;
    std::string text;
    const StepLogprob* logprob = nullptr;  // when asked for
};

enum class FinishReason { stop, length, cancelled };
const char* to_string(FinishReason reason);

struct GenerationResult {
    FinishReason finish = FinishReason::stop;
    std::size_t prompt_tokens = 0;
    std::size_t cached_tokens = 0;  // of prompt_tokens, taken from the prefix cache
    std::size_t completion_tokens = 0;
    double prompt_ms = 0;  // prefill (of the prompt tokens not cached)
    double decode_ms = 0;  // first sampled token to the end
    std::string text;      // everything released
};

struct GenerationHooks {
    // Called after each generated token; return false to stop (client gone).
    std::function<bool(const GenerationStep&)> on_step;
    // Polled before the prefill and before each decode step.
    std::function<bool()> cancelled;
};

// Throws aff::Error only for engine failures; `prompt` must fit the context with
// room for max_tokens (the caller checks, as it owns the error message).
GenerationResult generate(Engine& engine, const std::vector<std::int32_t>& prompt, const GenerationParams& params,
                          const GenerationHooks& hooks);

// Stop-string matching over streamed text (exposed for tests).
class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    // Adds text; returns what may be released now. `hit` turns true when a stop
    // string appeared (the returned text ends just before it; nothing follows).
    std::string push(std::string_view text, bool& hit);
    // Releases what was held back (generation ended without a stop string).
    std::string flush();

private:
    std::vector<std::string> stops_;
    std::string held_;
};

}  // namespace aff::serve
