// The one generation loop, over any Sequence (sequence.hpp: the CPU reference, the GPU model,
// the server's cached or scripted sequences): prefill the prompt, then pick each next token
// (sampled, or taken from a forced continuation) and run it, until the token budget, an end
// token, a stop string or cancellation. aff-run and aff-serve (libaff/serve/generation.hpp)
// both wrap it. Callers see every step (token, text released so far, logprobs when asked)
// and, when they ask, the logits of every position, which aff-run's diagnostics
// (--dump-logits, --logits-out, --force-tokens) are built on.
//
// Hooks for what comes next, called here but not implemented here:
//   - a Drafter (drafter.hpp) proposes tokens; the loop verifies them in one forward call,
//     keeps what the model agrees with and rewinds the sequence past the rest;
//   - between_dispatches runs after every forward call returns and before the next one is
//     issued: where a placement engine may move experts, and an observer time the calls;
//   - before_dispatch runs before every forward call, and before a rewind (which may run
//     tokens again): where a route trace learns what the next call's tokens are.
#pragma once

#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/sampler.hpp"
#include "libaff/runtime/sequence.hpp"
#include "libaff/runtime/text_stream.hpp"
#include "libaff/runtime/token_constraint.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {

struct GenerateOptions {
    std::vector<std::int32_t> prompt;  // must not be empty
    std::size_t max_new_tokens = 32;
    SamplerParams sampling;
    // When not empty, these are the generated tokens (teacher forcing): nothing is sampled,
    // max_new_tokens and end tokens are ignored, and no drafter is asked.
    std::vector<std::int32_t> forced;
    // A token that ends the generation (it is still reported as a step); null: none does.
    std::function<bool(std::int32_t)> is_end_token;
    // When given, steps carry the text of their tokens, and `stop` applies to it: the text is
    // released as soon as it can no longer turn into a stop string, a stop string itself never.
    TokenTextStream* text = nullptr;
    std::vector<std::string> stop;  // needs `text`
    int logprobs = -1;              // -1 none; k >= 0: the chosen token's logprob plus the top k
    // Structured output or a forced tool call: masks a copy of the logits before each sample
    // (logprobs still report the model's own distribution). Null: unconstrained. Not applied
    // to forced tokens.
    std::shared_ptr<TokenConstraint> constraint;
};

struct StepLogprob {
    std::int32_t token = 0;
    float logprob = 0.0f;
    std::vector<TokenLogprob> top;
};

// What one step adds. `text` may be empty (an unfinished character, text held back for a
// possible stop string) and may carry text of earlier tokens. The last step of a generation
// cut off by the budget may carry only held-back text, with token -1.
struct GenerationStep {
    std::int32_t token = 0;
    std::string text;
    const StepLogprob* logprob = nullptr;  // when asked for
};

enum class FinishReason { stop, length, cancelled };
const char* to_string(FinishReason reason);

// One forward call the loop made, as between_dispatches sees it (before_dispatch: one it is
// about to make, seconds 0). replay is before_dispatch's only: a rewind into a verify call
// that kept some of its guesses (or only its first token) goes back to the call's start and
// runs those again (undo_log.hpp); `tokens` is how many a rewind of that kind re-runs (a
// sequence that rewinds otherwise may run none).
struct Dispatch {
    enum class Kind { prompt, decode, verify, replay };
    Kind kind = Kind::decode;
    std::int64_t position = 0;  // of its first token
    std::size_t tokens = 0;
    double seconds = 0;
};

struct GenerateStats;

struct GenerateHooks {
    // Each step, as soon as its token is chosen; return false to stop (the client went away).
    std::function<bool(const GenerationStep&)> on_step;
    // The logits predicting position+1, computed at `position` whose input was
    // `input_token`; for every prompt position and every generated one. Asking for
    // them makes the prefill keep every position's logits.
    std::function<void(std::int64_t position, std::int32_t input_token, std::span<const float> logits)> on_logits;
    // Polled before the prefill and before each decode step.
    std::function<bool()> cancelled;
    // After every forward call (placement, observers).
    std::function<void(const Dispatch&)> between_dispatches;
    // Before every forward call and every rewind (route traces label the calls' tokens).
    std::function<void(const Dispatch&)> before_dispatch;
    // After each verified proposal of the drafter, the statistics so far (live acceptance).
    std::function<void(const GenerateStats&)> on_verified;
    Drafter* drafter = nullptr;
};

struct GenerateStats {
    FinishReason finish = FinishReason::length;
    bool ended_by_end_token = false;
    std::size_t prompt_tokens = 0;
    std::size_t generated_tokens = 0;
    double prefill_seconds = 0;
    double decode_forward_seconds = 0;  // every forward after the prefill
    double decode_seconds = 0;          // wall time from the end of the prefill to the end
    std::size_t decode_forwards = 0;
    std::size_t drafted_tokens = 0;     // proposed by the drafter and run in verify calls
    std::size_t accepted_tokens = 0;    // of those, the model's own choice
    std::size_t verify_calls = 0;       // proposals verified (one forward call each)
    // Per draft position i (0 = the first guess after the verified token): in how many
    // verified proposals it was drafted, and in how many it and every guess before it were
    // accepted. accepted_at[i] / drafted_at[i] is position i's acceptance.
    std::vector<std::size_t> drafted_at, accepted_at;
    std::string text;                   // everything released, when options.text is given
};

// Throws aff::Error (usage) naming `what` ("prompt", "forced") and the first token
// outside a vocabulary of `vocab` ids.
void check_tokens_in_vocabulary(std::size_t vocab, std::span<const std::int32_t> tokens, const char* what);

// Runs the prompt at the sequence's position and generates after it. Throws aff::Error
// (usage) for an empty prompt, a token outside the vocabulary, bad sampling parameters or stop
// strings without a text stream; errors of the sequence pass through. With a drafter, the
// sequence must be able to rewind (its depth is raised to the drafter's max_tokens() while the
// loop runs); the loop leaves it where a run without a drafter would have.
GenerateStats generate(Sequence& sequence, const GenerateOptions& options, const GenerateHooks& hooks);

}  // namespace aff
