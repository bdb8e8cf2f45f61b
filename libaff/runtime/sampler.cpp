// Token sampling (see sampler.hpp). The filters and the draw are KeptSet's (kept_set.hpp),
// which keeps the sorted candidate list's semantics (each filter a cut of a prefix, the draw
// in that order) without sorting the 129 280-token vocabulary, which had cost 13 ms a token.
#include "libaff/runtime/sampler.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/greedy_pick.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace aff {
namespace {

// exp in float (its 1e-7 is far below what a reported logprob shows), summed in double: a
// double exp per id had cost 0.9 ms a row at V = 129 280, twice a token with logprobs on.
float log_sum_exp(std::span<const float> logits, float max_logit) {
    double sum = 0.0;
    for (float l : logits) sum += std::exp(l - max_logit);
    return max_logit + float(std::log(sum));
}

float max_of(std::span<const float> logits) {
    float m = -std::numeric_limits<float>::infinity();
    for (float l : logits) m = std::max(m, l);
    return m;
}

}  // namespace

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
    if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature))
        throw_usage("temperature must be a finite number >= 0, got " + std::to_string(params.temperature));
    if (params.top_k < 0) throw_usage("top_k must be >= 0, got " + std::to_string(params.top_k));
    if (!(params.top_p >= 0.0f && params.top_p <= 1.0f))
        throw_usage("top_p must be in [0, 1], got " + std::to_string(params.top_p));
    if (!(params.min_p >= 0.0f && params.min_p <= 1.0f))
        throw_usage("min_p must be in [0, 1], got " + std::to_string(params.min_p));
}

// The draw is independent of the standard library's distribution implementations, so
// results match across builds.
double Sampler::uniform() { return double(rng_() >> 11) * (1.0 / 9007199254740992.0); }

std::int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) throw_internal("sampler: empty logits");
    if (params_.temperature == 0.0f) return greedy_pick(logits);
    kept_.build(logits, params_);
    return kept_.at(uniform() * kept_.total());
}

void Sampler::distribution(std::span<const float> logits, std::vector<float>& out) {
    if (logits.empty()) throw_internal("sampler: empty logits");
    if (params_.temperature == 0.0f) {
        out.assign(logits.size(), 0.0f);
        out[std::size_t(greedy_pick(logits))] = 1.0f;
        return;
    }
    kept_.build(logits, params_);
    kept_.fill(out);
}

std::int32_t Sampler::speculative(std::span<const float> logits, std::int32_t guess, std::span<const float> q) {
    if (q.size() != logits.size() || guess < 0 || std::size_t(guess) >= q.size() || !(q[std::size_t(guess)] > 0.0f))
        throw_internal("sampler: a draft token outside its own distribution");
    distribution(logits, p_);
    const double pg = p_[std::size_t(guess)], qg = q[std::size_t(guess)];
    // Accept with probability min(1, p/q): u < p/q, written without the division.
    if (uniform() * qg < pg) return guess;
    // The residual max(0, p - q), zero at guess (rejection needs p(guess) < q(guess)); where
    // p and q agree to rounding, what is left of p: p itself less the guess.
    std::vector<float>& r = p_;
    double total = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) total += std::max(0.0, double(r[i]) - q[i]);
    if (total > 0.0) {
        for (std::size_t i = 0; i < r.size(); ++i) r[i] = float(std::max(0.0, double(r[i]) - q[i]));
    } else {
        r[std::size_t(guess)] = 0.0f;
        for (float v : r) total += v;
        if (!(total > 0.0)) return guess;
    }
    const double u = uniform() * total;
    double acc = 0.0;
    std::size_t last = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        if (r[i] <= 0.0f) continue;
        acc += r[i];
        last = i;
        if (u < acc) return std::int32_t(i);
    }
    return std::int32_t(last);
}

float token_logprob(std::span<const float> logits, std::int32_t token) {
    if (token < 0 || std::size_t(token) >= logits.size()) throw_internal("token_logprob: token out of range");
    return logits[token] - log_sum_exp(logits, max_of(logits));
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, std::size_t k) {
    k = std::min(k, logits.size());
    // The k best in the sampler's order by one scan into a short ordered list (k is small:
    // OpenAI allows 20).
    auto before = [&](std::int32_t a, std::int32_t b) { return sampler_before(logits, a, b); };
    std::vector<std::int32_t> best;
    best.reserve(k + 1);
    for (std::int32_t i = 0; k > 0 && i < std::int32_t(logits.size()); ++i) {
        if (best.size() == k && !before(i, best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), i, before), i);
        if (best.size() > k) best.pop_back();
    }
    const float lse = log_sum_exp(logits, max_of(logits));
    std::vector<TokenLogprob> out;
    out.reserve(k);
    for (std::int32_t id : best) out.push_back({id, logits[std::size_t(id)] - lse});
    return out;
}

}  // namespace aff
