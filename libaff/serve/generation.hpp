// One generation of the server: the runtime's generation loop (libaff/runtime/generate.hpp)
// over the engine's sequence, with the engine's end tokens and text stream: prefill the
// prompt, then sample and decode token by token until an end token, a stop string, the
// token budget, or cancellation (a client that went away: checked before every decode step,
// so at most one more token is computed). Text is released as soon as it can no longer turn
// into a stop string; the stop string itself is never released. Timings are reported here
// so every endpoint reports them the same way.
#pragma once

#include "libaff/runtime/generate.hpp"
#include "libaff/serve/engine.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aff::serve {

struct GenerationParams {
    std::size_t max_tokens = 16;
    SamplerParams sampling;
    std::vector<std::string> stop;
    int logprobs = -1;  // -1 none; k >= 0: the chosen token's logprob plus the top k
    // Structured output or a forced tool call (GenerateOptions::constraint). Null: unconstrained.
    std::shared_ptr<TokenConstraint> constraint;
};

struct GenerationResult {
    FinishReason finish = FinishReason::stop;
    std::size_t prompt_tokens = 0;
    std::size_t cached_tokens = 0;  // of prompt_tokens, taken from the prefix cache
    std::size_t completion_tokens = 0;
    double prompt_ms = 0;  // prefill (of the prompt tokens not cached)
    double decode_ms = 0;  // first sampled token to the end
    std::string text;      // everything released
    // Speculative decoding (all zero when the engine has no drafter): GenerateStats' figures.
    bool drafting = false;
    std::size_t verify_calls = 0, drafted_tokens = 0, accepted_tokens = 0;
    std::vector<std::size_t> drafted_at, accepted_at;
};

// Throws aff::Error only for engine failures; `prompt` must fit the context with
// room for max_tokens (the caller checks, as it owns the error message). The server sets
// hooks.on_step (return false when the client is gone) and hooks.cancelled.
GenerationResult generate(Engine& engine, const std::vector<std::int32_t>& prompt, const GenerationParams& params,
                          const GenerateHooks& hooks);

}  // namespace aff::serve
