// The generation loop of generate.hpp.
#include "libaff/runtime/generate.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <chrono>
#include <string>

namespace aff {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void check_tokens_in_vocabulary(const ModelConfig& config, std::span<const std::int32_t> tokens, const char* what) {
    const int vocab = config.vocab_size;
    for (std::int32_t t : tokens)
        if (t < 0 || t >= vocab)
            throw_usage(std::string(what) + " token " + std::to_string(t) + " is outside the model's vocabulary (0.." +
                        std::to_string(vocab - 1) + ")");
}

GenerateStats generate(const Model& model, DecodeState& state, const GenerateOptions& options,
                       const GenerateCallbacks& callbacks) {
    const ForwardFn forward = [&](std::span<const std::int32_t> tokens, bool all_logits) {
        return model.forward(state, tokens, all_logits);
    };
    return generate(model.config(), forward, state.position, options, callbacks);
}

GenerateStats generate(const ModelConfig& cfg, const ForwardFn& forward, std::int64_t start_position,
                       const GenerateOptions& options, const GenerateCallbacks& callbacks) {
    const int vocab = cfg.vocab_size;
    if (options.prompt.empty()) throw_usage("the prompt is empty");
    check_tokens_in_vocabulary(cfg, options.prompt, "prompt");
    check_tokens_in_vocabulary(cfg, options.forced, "forced");

    GenerateStats stats;
    stats.prompt_tokens = options.prompt.size();
    const bool want_logits = static_cast<bool>(callbacks.on_logits);
    const std::int64_t start = start_position;
    std::int64_t position = start + static_cast<std::int64_t>(options.prompt.size());  // next position to run

    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> logits = forward(options.prompt, want_logits);
    stats.prefill_seconds = seconds_since(t0);
    if (want_logits) {
        for (std::size_t i = 0; i < options.prompt.size(); ++i)
            callbacks.on_logits(start + static_cast<std::int64_t>(i), options.prompt[i],
                                std::span<const float>(logits).subspan(i * vocab, vocab));
        logits.erase(logits.begin(), logits.end() - vocab);  // keep the last row
    }

    Sampler sampler(options.sampling);
    const bool forcing = !options.forced.empty();
    const std::size_t budget = forcing ? options.forced.size() : static_cast<std::size_t>(std::max(0, options.max_new_tokens));
    auto is_eos = [&](std::int32_t t) {
        return std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), t) != cfg.eos_token_ids.end();
    };

    double decode = 0;
    for (std::size_t i = 0; i < budget; ++i) {
        const std::int32_t token = forcing ? options.forced[i] : sampler.sample(logits);
        ++stats.generated_tokens;
        if (callbacks.on_token) callbacks.on_token(token);
        const bool last = i + 1 == budget;
        if (!forcing && !options.ignore_eos && is_eos(token)) {
            stats.ended_by_eos = true;
            break;
        }
        // The last token needs a forward only when its logits are asked for.
        if (last && !want_logits) break;
        auto t1 = std::chrono::steady_clock::now();
        const std::int32_t one[1] = {token};
        logits = forward(one, false);
        ++position;
        decode += seconds_since(t1);
        ++stats.decode_forwards;
        if (want_logits) callbacks.on_logits(position - 1, token, logits);
    }
    stats.decode_seconds = decode;
    return stats;
}

}  // namespace aff
