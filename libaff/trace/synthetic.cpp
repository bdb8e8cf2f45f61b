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
    double pmf(std::uint32_t r) const { return r == 0 ? cdf_[0] : cdf_[r] - cdf_[r - 1]; }
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

namespace {

// The generator's state: the "model" (per-layer exponents, rankings, hash tables) and the
// token stream's random state. synthesize() records what it routes; synthetic_oracle()
// also reads, at each step, the probabilities the step was routed with.
class Generator {
public:
    explicit Generator(const SyntheticParams& p) : p_(p), model_rng_(p.model_seed), rng_(p.seed), tokens_(p.vocab, p.token_zipf_s) {
        TraceHeader& h = header_;
        h.layers = p.layers, h.experts = p.experts, h.top_k = p.top_k;
        h.identity_kind = IdentityKind::synthetic;
        h.identity = p.seed;
        h.expert_bytes = p.expert_bytes;
        h.hash_layers.assign(p.layers, false);
        for (std::uint32_t l = 0; l < p.hash_layers && l < p.layers; ++l) h.hash_layers[l] = true;
        h.check();
        if (p.top_k * 4 > p.experts && p.floor < 1) throw_usage("a synthetic trace needs experts >= 4 x top_k");
        if (p.prefill_chunk == 0 || p.vocab == 0) throw_usage("prefill_chunk and vocab must be at least 1");
        ranking_.resize(p.layers);
        tid2eid_.resize(p.layers);
        burst_.resize(p.layers);
        for (std::uint32_t l = 0; l < p.layers; ++l) {
            const double s = p.zipf_s + p.zipf_s_spread * std::uniform_real_distribution<double>(-1, 1)(model_rng_);
            zipf_.emplace_back(p.experts, s);
            ranking_[l].resize(p.experts);
            std::iota(ranking_[l].begin(), ranking_[l].end(), 0);
            std::shuffle(ranking_[l].begin(), ranking_[l].end(), model_rng_);
            if (h.hash_layers[l]) {
                tid2eid_[l].resize(std::size_t(p.vocab) * p.top_k);
                for (std::uint32_t v = 0; v < p.vocab; ++v)
                    for (std::uint32_t j = 0; j < p.top_k; ++j)
                        tid2eid_[l][std::size_t(v) * p.top_k + j] = std::uint16_t(model_rng_() % p.experts);
            }
        }
    }
    const TraceHeader& header() const { return header_; }

    // Every step of every sequence in order: on_step(step) is called after the step is
    // routed and before the state moves on (drift, bursts).
    template <class OnStep>
    void run(OnStep&& on_step) {
        for (std::uint32_t s = 0; s < p_.sequences; ++s) {
            std::uint32_t pos = 0;
            while (pos < p_.prompt_tokens) {
                const std::uint32_t n = std::min(p_.prefill_chunk, p_.prompt_tokens - pos);
                on_step(step(s, pos, n, Phase::prefill));
                advance();
                pos += n;
            }
            for (std::uint32_t d = 0; d < p_.decode_tokens; ++d, ++pos) {
                on_step(step(s, pos, 1, Phase::decode));
                advance();
            }
        }
    }

    // Each key's chance (layer-major) that one token of the current step selects it. Learned
    // layers: the chance of one draw, p = burst share + (1 − burst share)·(floor/E + (1 −
    // floor)·Zipf(rank)), taken to 1 − (1 − p)^K for K distinct draws (an approximation:
    // the draws reject repeats). Hash layers: the token distribution's mass on the ids whose
    // table row holds the expert, exact.
    void selection_chances(std::vector<double>& out) {
        const std::uint32_t E = p_.experts;
        out.assign(std::size_t(p_.layers) * E, 0.0);
        for (std::uint32_t l = 0; l < p_.layers; ++l) {
            double* o = &out[std::size_t(l) * E];
            if (header_.hash_layers[l]) {
                if (hash_chance_.empty()) hash_chance_ = hash_chances();
                std::copy_n(&hash_chance_[std::size_t(l) * E], E, o);
                continue;
            }
            const double burst = burst_left_ > 0 ? p_.burst_weight : 0.0;
            for (std::uint32_t r = 0; r < E; ++r) o[ranking_[l][r]] = (1 - burst) * (p_.floor / E + (1 - p_.floor) * zipf_[l].pmf(r));
            if (burst > 0)
                for (std::uint16_t e : burst_[l]) o[e] += burst / double(burst_[l].size());
            for (std::uint32_t e = 0; e < E; ++e) o[e] = 1 - std::pow(1 - std::min(1.0, o[e]), double(p_.top_k));
        }
    }

private:
    std::vector<double> hash_chances() const {
        const std::uint32_t E = p_.experts;
        std::vector<double> c(std::size_t(p_.layers) * E, 0.0);
        std::vector<std::uint16_t> row;
        for (std::uint32_t l = 0; l < p_.layers; ++l) {
            if (!header_.hash_layers[l]) continue;
            for (std::uint32_t v = 0; v < p_.vocab; ++v) {
                row.assign(&tid2eid_[l][std::size_t(v) * p_.top_k], &tid2eid_[l][std::size_t(v + 1) * p_.top_k]);
                std::sort(row.begin(), row.end());
                row.erase(std::unique(row.begin(), row.end()), row.end());
                for (std::uint16_t e : row) c[std::size_t(l) * E + e] += tokens_.pmf(v);
            }
        }
        return c;
    }
    std::uint32_t uniform(std::uint32_t n) { return std::uint32_t(rng_() % n); }
    bool chance(double q) { return std::uniform_real_distribution<double>(0, 1)(rng_) < q; }

    void route(std::uint32_t l, std::uint32_t token, std::uint16_t* out, float* w) {
        if (header_.hash_layers[l]) {
            for (std::uint32_t j = 0; j < p_.top_k; ++j)
                out[j] = tid2eid_[l][std::size_t(token) * p_.top_k + j], w[j] = 1.0f / p_.top_k;
            return;
        }
        for (std::uint32_t j = 0; j < p_.top_k;) {
            std::uint16_t e;
            if (burst_left_ > 0 && chance(p_.burst_weight)) e = burst_[l][uniform(std::uint32_t(burst_[l].size()))];
            else if (chance(p_.floor)) e = std::uint16_t(uniform(p_.experts));
            else e = ranking_[l][zipf_[l].draw(rng_)];
            if (std::find(out, out + j, e) != out + j) continue;  // top-k selections are distinct
            out[j] = e;
            w[j] = 1.0f / float(j + 2);
            ++j;
        }
    }
    void advance() {
        for (std::uint32_t l = 0; l < p_.layers; ++l) {
            if (header_.hash_layers[l]) continue;
            double swaps = p_.drift_swaps;
            while (swaps > 0) {
                if (swaps >= 1 || chance(swaps)) std::swap(ranking_[l][uniform(p_.experts)], ranking_[l][uniform(p_.experts)]);
                swaps -= 1;
            }
        }
        if (burst_left_ > 0) {
            --burst_left_;
        } else if (p_.burst_rate > 0 && chance(p_.burst_rate)) {
            burst_left_ = p_.burst_steps;
            for (auto& b : burst_) {
                b.clear();
                for (std::uint32_t i = 0; i < p_.burst_experts; ++i) b.push_back(std::uint16_t(uniform(p_.experts)));
            }
        }
    }
    TraceStep step(std::uint32_t seq, std::uint32_t first_position, std::uint32_t n, Phase phase) {
        TraceStep st;
        for (std::uint32_t i = 0; i < n; ++i) st.tokens.push_back({tokens_.draw(rng_), seq, first_position + i, phase});
        st.experts.resize(std::size_t(p_.layers) * n * p_.top_k);
        st.weights.resize(st.experts.size());
        for (std::uint32_t l = 0; l < p_.layers; ++l) {
            st.layers.push_back(std::uint16_t(l));
            for (std::uint32_t i = 0; i < n; ++i) {
                const std::size_t at = (std::size_t(l) * n + i) * p_.top_k;
                route(l, st.tokens[i].token, &st.experts[at], &st.weights[at]);
            }
        }
        return st;
    }

    SyntheticParams p_;
    TraceHeader header_;
    std::mt19937_64 model_rng_, rng_;
    std::vector<ZipfTable> zipf_;
    ZipfTable tokens_;
    std::vector<std::vector<std::uint16_t>> ranking_, tid2eid_, burst_;
    std::uint32_t burst_left_ = 0;
    std::vector<double> hash_chance_;
};

}  // namespace

RouteTrace synthesize(const SyntheticParams& p) {
    Generator g(p);
    RouteTrace t;
    t.header = g.header();
    g.run([&](TraceStep&& st) { t.steps.push_back(std::move(st)); });
    return t;
}

OracleCounts synthetic_oracle(const SyntheticParams& p, std::uint32_t gpu_slots) {
    Generator g(p);
    const std::uint32_t E = p.experts, keys = p.layers * p.experts;
    const std::uint32_t held = std::min(gpu_slots, keys);
    std::vector<double> chance;
    std::vector<std::uint32_t> order(keys);
    std::vector<bool> in_set(keys);
    std::vector<bool> seen(keys);
    std::vector<std::uint32_t> touched;
    OracleCounts c;
    g.run([&](const TraceStep& st) {
        g.selection_chances(chance);
        std::iota(order.begin(), order.end(), 0u);
        // The `held` likeliest keys (ties to the lower key, as the policies break them).
        const auto likelier = [&](std::uint32_t a, std::uint32_t b) { return chance[a] > chance[b] || (chance[a] == chance[b] && a < b); };
        if (held > 0 && held < keys) std::nth_element(order.begin(), order.begin() + held, order.end(), likelier);
        std::fill(in_set.begin(), in_set.end(), false);
        for (std::uint32_t i = 0; i < held; ++i) in_set[order[i]] = true;
        const std::size_t n = st.n();
        for (std::size_t b = 0; b < st.layers.size(); ++b) {
            touched.clear();
            for (std::size_t i = 0; i < n; ++i)
                for (std::uint16_t e : st.selection(b, i, p.top_k)) {
                    const std::uint32_t k = std::uint32_t(st.layers[b]) * E + e;
                    if (seen[k]) continue;
                    seen[k] = true;
                    touched.push_back(k);
                }
            for (std::uint32_t k : touched) {
                ++c.accesses;
                c.gpu_hits += in_set[k];
                seen[k] = false;
            }
        }
    });
    return c;
}

}  // namespace aff::trace
