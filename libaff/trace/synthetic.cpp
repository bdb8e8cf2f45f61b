// The synthetic trace generator of synthetic.hpp.
#include "libaff/trace/synthetic.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>

namespace aff::trace {

namespace {

// Draws ranks 0..n-1 with P(r) ∝ (r + 1)^-s.
class ZipfTable {
public:
    ZipfTable(std::uint32_t n, double s) : cdf_(n) {
        double sum = 0;
        for (std::uint32_t r = 0; r < n; ++r) cdf_[r] = sum += std::pow(r + 1.0, -s);
        for (double& c : cdf_) c /= sum;
    }
    std::uint32_t draw(std::mt19937_64& rng) const {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        return std::uint32_t(std::min<std::size_t>(cdf_.size() - 1, std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin()));
    }

private:
    std::vector<double> cdf_;
};

constexpr std::array<std::string_view, 5> kFamilies = {"v4flash", "drift", "bursty", "uniform", "tiny"};

}  // namespace

std::span<const std::string_view> synthetic_family_names() { return kFamilies; }

SyntheticParams synthetic_family(std::string_view name) {
    SyntheticParams p;
    if (name == "v4flash") return p;
    if (name == "drift") {
        p.drift_swaps = 0.5;
        return p;
    }
    if (name == "bursty") {
        p.burst_rate = 0.01;
        return p;
    }
    if (name == "uniform") {
        p.floor = 1.0;
        p.drift_swaps = 0;
        return p;
    }
    if (name == "tiny") {
        p.layers = 2, p.experts = 8, p.top_k = 2, p.hash_layers = 1, p.expert_bytes = 4096;
        p.sequences = 1, p.prompt_tokens = 1, p.prefill_chunk = 1, p.decode_tokens = 3, p.vocab = 64;
        return p;
    }
    throw_usage("unknown synthetic family \"" + std::string(name) + "\" (v4flash, drift, bursty, uniform, tiny)");
}

RouteTrace synthesize(const SyntheticParams& p) {
    RouteTrace t;
    TraceHeader& h = t.header;
    h.layers = p.layers, h.experts = p.experts, h.top_k = p.top_k;
    h.identity_kind = IdentityKind::synthetic;
    h.identity = p.seed;
    h.expert_bytes = p.expert_bytes;
    h.hash_layers.assign(p.layers, false);
    for (std::uint32_t l = 0; l < p.hash_layers && l < p.layers; ++l) h.hash_layers[l] = true;
    h.check();
    if (p.top_k * 4 > p.experts && p.floor < 1) throw_usage("a synthetic trace needs experts >= 4 x top_k");
    if (p.prefill_chunk == 0 || p.vocab == 0) throw_usage("prefill_chunk and vocab must be at least 1");
    std::mt19937_64 model_rng(p.model_seed), rng(p.seed);
    auto uniform = [&](std::uint32_t n) { return std::uint32_t(rng() % n); };
    auto chance = [&](double q) { return std::uniform_real_distribution<double>(0, 1)(rng) < q; };

    std::vector<ZipfTable> zipf;
    std::vector<std::vector<std::uint16_t>> ranking(p.layers), tid2eid(p.layers);
    for (std::uint32_t l = 0; l < p.layers; ++l) {
        const double s = p.zipf_s + p.zipf_s_spread * std::uniform_real_distribution<double>(-1, 1)(model_rng);
        zipf.emplace_back(p.experts, s);
        ranking[l].resize(p.experts);
        std::iota(ranking[l].begin(), ranking[l].end(), 0);
        std::shuffle(ranking[l].begin(), ranking[l].end(), model_rng);
        if (h.hash_layers[l]) {
            tid2eid[l].resize(std::size_t(p.vocab) * p.top_k);
            for (std::uint32_t v = 0; v < p.vocab; ++v)
                for (std::uint32_t j = 0; j < p.top_k; ++j)
                    tid2eid[l][std::size_t(v) * p.top_k + j] = std::uint16_t(model_rng() % p.experts);
        }
    }
    const ZipfTable tokens(p.vocab, p.token_zipf_s);
    std::vector<std::vector<std::uint16_t>> burst(p.layers);
    std::uint32_t burst_left = 0;

    auto route = [&](std::uint32_t l, std::uint32_t token, std::uint16_t* out, float* w) {
        if (h.hash_layers[l]) {
            for (std::uint32_t j = 0; j < p.top_k; ++j) out[j] = tid2eid[l][std::size_t(token) * p.top_k + j], w[j] = 1.0f / p.top_k;
            return;
        }
        for (std::uint32_t j = 0; j < p.top_k;) {
            std::uint16_t e;
            if (burst_left > 0 && chance(p.burst_weight)) e = burst[l][uniform(std::uint32_t(burst[l].size()))];
            else if (chance(p.floor)) e = std::uint16_t(uniform(p.experts));
            else e = ranking[l][zipf[l].draw(rng)];
            if (std::find(out, out + j, e) != out + j) continue;  // top-k selections are distinct
            out[j] = e;
            w[j] = 1.0f / float(j + 2);
            ++j;
        }
    };
    auto advance = [&] {
        for (std::uint32_t l = 0; l < p.layers; ++l) {
            if (h.hash_layers[l]) continue;
            double swaps = p.drift_swaps;
            while (swaps > 0) {
                if (swaps >= 1 || chance(swaps)) std::swap(ranking[l][uniform(p.experts)], ranking[l][uniform(p.experts)]);
                swaps -= 1;
            }
        }
        if (burst_left > 0) {
            --burst_left;
        } else if (p.burst_rate > 0 && chance(p.burst_rate)) {
            burst_left = p.burst_steps;
            for (auto& b : burst) {
                b.clear();
                for (std::uint32_t i = 0; i < p.burst_experts; ++i) b.push_back(std::uint16_t(uniform(p.experts)));
            }
        }
    };
    auto step = [&](std::uint32_t seq, std::uint32_t first_position, std::uint32_t n, Phase phase) {
        TraceStep st;
        for (std::uint32_t i = 0; i < n; ++i) st.tokens.push_back({tokens.draw(rng), seq, first_position + i, phase});
        st.experts.resize(std::size_t(p.layers) * n * p.top_k);
        st.weights.resize(st.experts.size());
        for (std::uint32_t l = 0; l < p.layers; ++l) {
            st.layers.push_back(std::uint16_t(l));
            for (std::uint32_t i = 0; i < n; ++i) {
                const std::size_t at = (std::size_t(l) * n + i) * p.top_k;
                route(l, st.tokens[i].token, &st.experts[at], &st.weights[at]);
            }
        }
        t.steps.push_back(std::move(st));
        advance();
    };
    for (std::uint32_t s = 0; s < p.sequences; ++s) {
        std::uint32_t pos = 0;
        while (pos < p.prompt_tokens) {
            const std::uint32_t n = std::min(p.prefill_chunk, p.prompt_tokens - pos);
            step(s, pos, n, Phase::prefill);
            pos += n;
        }
        for (std::uint32_t d = 0; d < p.decode_tokens; ++d, ++pos) step(s, pos, 1, Phase::decode);
    }
    return t;
}

}  // namespace aff::trace
