// Token sampling (see sampler.hpp). Works on a sorted candidate list so each filter is
// a cut of a prefix; the vocabulary is 129 280 tokens, so a partial sort to the largest
// cut keeps this far below the cost of one decode step.
#include "libaff/runtime/sampler.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/greedy_pick.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace aff {
namespace {

bool better(std::span<const float> logits, std::int32_t a, std::int32_t b) {
    const float la = logits[a], lb = logits[b];
    if (la != lb) return la > lb;
    return a < b;
}

float log_sum_exp(std::span<const float> logits, float max_logit) {
    double sum = 0.0;
    for (float l : logits) sum += std::exp(double(l) - max_logit);
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

// Temperature 0: the shared greedy rule (better() agrees with it: a later id wins only by a
// larger value, and NaN never does).
static std::int32_t argmax(std::span<const float> logits) { return greedy_pick(logits); }

std::size_t Sampler::candidates(std::span<const float> logits, double& total) {
    // Candidates sorted by logit; only as many as the filters can keep.
    order_.resize(logits.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::size_t keep = logits.size();
    if (params_.top_k > 0) keep = std::min<std::size_t>(keep, std::size_t(params_.top_k));
    auto cmp = [&](std::int32_t a, std::int32_t b) { return better(logits, a, b); };
    if (keep < order_.size()) {
        std::partial_sort(order_.begin(), order_.begin() + std::ptrdiff_t(keep), order_.end(), cmp);
    } else {
        std::sort(order_.begin(), order_.end(), cmp);
    }
    // Softmax over the kept candidates at the requested temperature.
    const double inv_t = 1.0 / params_.temperature;
    const double top = logits[order_[0]];
    probs_.resize(keep);
    double sum = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        const double p = std::exp((double(logits[order_[i]]) - top) * inv_t);
        probs_[i] = float(p);
        sum += p;
    }
    for (std::size_t i = 0; i < keep; ++i) probs_[i] = float(probs_[i] / sum);
    // min-p: relative to the most likely token (probs_[0]).
    if (params_.min_p > 0.0f) {
        const float floor = params_.min_p * probs_[0];
        std::size_t k = 1;
        while (k < keep && probs_[k] >= floor) ++k;
        keep = k;
    }
    // top-p: smallest prefix whose mass reaches top_p (mass of the kept set so far).
    if (params_.top_p < 1.0f) {
        double mass = 0.0, kept = 0.0;
        for (std::size_t i = 0; i < keep; ++i) kept += probs_[i];
        std::size_t k = 0;
        while (k < keep) {
            mass += probs_[k];
            ++k;
            if (mass >= params_.top_p * kept) break;
        }
        keep = k;
    }
    total = 0.0;
    for (std::size_t i = 0; i < keep; ++i) total += probs_[i];
    return keep;
}

// The draw is independent of the standard library's distribution implementations, so
// results match across builds.
double Sampler::uniform() { return double(rng_() >> 11) * (1.0 / 9007199254740992.0); }

std::int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) throw_internal("sampler: empty logits");
    if (params_.temperature == 0.0f) return argmax(logits);
    double total = 0.0;
    const std::size_t keep = candidates(logits, total);
    const double u = uniform() * total;
    double acc = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        acc += probs_[i];
        if (u < acc) return order_[i];
    }
    return order_[keep - 1];
}

void Sampler::distribution(std::span<const float> logits, std::vector<float>& out) {
    if (logits.empty()) throw_internal("sampler: empty logits");
    out.assign(logits.size(), 0.0f);
    if (params_.temperature == 0.0f) {
        out[std::size_t(argmax(logits))] = 1.0f;
        return;
    }
    double total = 0.0;
    const std::size_t keep = candidates(logits, total);
    for (std::size_t i = 0; i < keep; ++i) out[std::size_t(order_[i])] = float(probs_[i] / total);
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
    std::vector<std::int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                      [&](std::int32_t a, std::int32_t b) { return better(logits, a, b); });
    const float lse = log_sum_exp(logits, max_of(logits));
    std::vector<TokenLogprob> out;
    out.reserve(k);
    for (std::size_t i = 0; i < k; ++i) out.push_back({order[i], logits[order[i]] - lse});
    return out;
}

}  // namespace aff
