// One generation on the CPU reference model: prefill the prompt, then pick each next
// token (sampled, or taken from a forced continuation) and run it, until the token
// budget or an end token. Callers see every token and, when they ask, the logits of
// every position, which is what aff-run's diagnostics (--dump-logits, --logits-out,
// --force-tokens) are built on.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/sampler.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace aff {

struct GenerateOptions {
    std::vector<std::int32_t> prompt;  // must not be empty
    int max_new_tokens = 32;
    bool ignore_eos = false;
    SamplerParams sampling;
    // When not empty, these are the generated tokens (teacher forcing): nothing is
    // sampled and max_new_tokens is ignored.
    std::vector<std::int32_t> forced;
};

struct GenerateStats {
    std::size_t prompt_tokens = 0;
    std::size_t generated_tokens = 0;
    double prefill_seconds = 0;
    double decode_seconds = 0;  // every forward after the prefill
    std::size_t decode_forwards = 0;
    bool ended_by_eos = false;
};

struct GenerateCallbacks {
    // Each generated token, as soon as it is chosen.
    std::function<void(std::int32_t token)> on_token;
    // The logits predicting position+1, computed at `position` whose input was
    // `input_token`; for every prompt position and every generated one. Asking for
    // them makes the prefill keep every position's logits.
    std::function<void(std::int64_t position, std::int32_t input_token, std::span<const float> logits)> on_logits;
};

// Throws aff::Error (usage) naming `what` ("prompt", "forced") and the first token
// outside the model's vocabulary.
void check_tokens_in_vocabulary(const ModelConfig& config, std::span<const std::int32_t> tokens, const char* what);

// Throws aff::Error (usage) for an empty prompt or a token outside the vocabulary.
GenerateStats generate(const Model& model, DecodeState& state, const GenerateOptions& options,
                       const GenerateCallbacks& callbacks);

// The same loop over any forward pass (the CPU reference or the GPU model of libaff/gpu):
// forward runs tokens at the sequence's next positions, the first at start_position, and
// returns logits as Model::forward does.
using ForwardFn = std::function<std::vector<float>(std::span<const std::int32_t> tokens, bool all_logits)>;
GenerateStats generate(const ModelConfig& config, const ForwardFn& forward, std::int64_t start_position,
                       const GenerateOptions& options, const GenerateCallbacks& callbacks);

}  // namespace aff
