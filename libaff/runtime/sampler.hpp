// Picks the next token from a row of logits: temperature, top-k, top-p (nucleus) and
// min-p, seeded so a generation is reproducible. For speculative decoding it also gives the
// distribution it samples from (a draft model's q, the target's p) and the standard
// speculative choice between a draft token and the target (accept with min(1, p/q), else
// draw from the normalised max(0, p - q)), which leaves the output distributed as plain
// sampling from the target's p. Also the log-probabilities a server
// reports (OpenAI `logprobs`), which are taken from the model's own distribution
// (softmax of the raw logits), not from the truncated one that was sampled.
// The generation loop that calls this is generate.hpp's, which aff-run and aff-serve share.
#pragma once

#include "libaff/runtime/kept_set.hpp"

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace aff {

struct SamplerParams {
    float temperature = 1.0f;  // 0 = greedy (argmax); otherwise logits are divided by it
    int top_k = 0;             // 0 = off; otherwise keep the k most likely tokens
    float top_p = 1.0f;        // 1 = off; keep the smallest set whose mass reaches top_p
    float min_p = 0.0f;        // 0 = off; drop tokens below min_p * p(most likely)
    std::uint64_t seed = 0;
};

struct TokenLogprob {
    std::int32_t token = 0;
    float logprob = 0.0f;
};

class Sampler {
public:
    // Throws aff::Error (usage) naming the parameter when one is out of range.
    explicit Sampler(const SamplerParams& params);

    // Returns the chosen token id. Filters apply in the order top-k, temperature,
    // min-p, top-p; ties are broken by the lower token id, so the result depends only
    // on the logits, the parameters and the number of earlier calls.
    std::int32_t sample(std::span<const float> logits);

    // The distribution sample() draws from, dense over the vocabulary (zero outside the
    // filters' cut; one-hot on the argmax at temperature 0) into `out`. Draws nothing.
    void distribution(std::span<const float> logits, std::vector<float>& out);

    // Speculative sampling of one position: `guess` was drawn from the draft distribution q
    // (dense, q[guess] > 0), `logits` are the target's. Returns guess with probability
    // min(1, p(guess)/q(guess)), else a token drawn from max(0, p - q) normalised (never
    // guess), where p is distribution(logits); the result is distributed as p.
    std::int32_t speculative(std::span<const float> logits, std::int32_t guess, std::span<const float> q);

    const SamplerParams& params() const { return params_; }

    // A uniform double in [0, 1) from 53 random bits, the next draw of the generator sample()
    // uses (a drafter whose guesses are drawn on a device takes its draws from here).
    double uniform();

private:
    std::vector<float> p_;  // scratch of speculative()
    SamplerParams params_;
    std::mt19937_64 rng_;
    KeptSet kept_;  // scratch, reused across calls
};

// log-softmax of logits at one token.
float token_logprob(std::span<const float> logits, std::int32_t token);
// The k most likely tokens under softmax(logits), most likely first (ties: lower id).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, std::size_t k);

}  // namespace aff
