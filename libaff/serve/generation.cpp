// The server's generation (see generation.hpp): the runtime loop with the engine's end
// tokens, text stream and prefix-cache bookkeeping.
#include "libaff/serve/generation.hpp"

namespace aff::serve {

GenerationResult generate(Engine& engine, const std::vector<std::int32_t>& prompt, const GenerationParams& params,
                          const GenerateHooks& hooks) {
    GenerationResult result;
    result.prompt_tokens = prompt.size();
    if (hooks.cancelled && hooks.cancelled()) {
        result.finish = FinishReason::cancelled;
        return result;
    }
    Sequence& sequence = engine.sequence();
    sequence.reset();
    auto text = engine.text_stream();
    GenerateOptions options;
    options.prompt = prompt;
    options.max_new_tokens = params.max_tokens;
    options.sampling = params.sampling;
    options.is_end_token = [&](std::int32_t token) { return engine.is_end_token(token); };
    options.text = text.get();
    options.stop = params.stop;
    options.logprobs = params.logprobs;
    options.constraint = params.constraint;
    GenerateHooks with_drafter = hooks;
    if (!with_drafter.drafter) with_drafter.drafter = engine.drafter();
    with_drafter.before_dispatch = [&engine, inner = hooks.before_dispatch](const Dispatch& d) {
        engine.before_dispatch(d);
        if (inner) inner(d);
    };
    const GenerateStats stats = aff::generate(sequence, options, with_drafter);
    result.finish = stats.finish;
    result.cached_tokens = engine.cached_tokens();
    result.completion_tokens = stats.generated_tokens;
    result.prompt_ms = stats.prefill_seconds * 1e3;
    result.decode_ms = stats.decode_seconds * 1e3;
    result.text = stats.text;
    result.drafting = with_drafter.drafter != nullptr;
    result.verify_calls = stats.verify_calls;
    result.drafted_tokens = stats.drafted_tokens;
    result.accepted_tokens = stats.accepted_tokens;
    result.drafted_at = stats.drafted_at;
    result.accepted_at = stats.accepted_at;
    // After the timing: the snapshot this may take is the cache's cost, not decoding's.
    engine.end_sequence();
    return result;
}

}  // namespace aff::serve
