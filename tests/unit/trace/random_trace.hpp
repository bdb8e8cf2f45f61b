// Random route traces for the trace and placement tests: any geometry, steps of 1..max
// tokens, every layer or a prefix of them, expert ids drawn from a skewed distribution so
// that caches see reuse. Deterministic in the seed.
#pragma once

#include "libaff/trace/route_trace.hpp"

#include <algorithm>
#include <cstdint>
#include <random>

namespace aff::test {

inline trace::RouteTrace random_trace(std::uint64_t seed, std::uint32_t layers, std::uint32_t experts, std::uint32_t k,
                                      std::size_t steps, std::uint32_t max_tokens = 4) {
    std::mt19937_64 rng(seed);
    trace::RouteTrace t;
    t.header.layers = layers;
    t.header.experts = experts;
    t.header.top_k = k;
    t.header.identity_kind = trace::IdentityKind::synthetic;
    t.header.identity = seed;
    t.header.expert_bytes = 1000 + seed % 7;
    t.header.hash_layers.assign(layers, false);
    if (layers > 1) t.header.hash_layers[0] = true;
    std::uint32_t position = 0;
    for (std::size_t s = 0; s < steps; ++s) {
        trace::TraceStep st;
        const std::uint32_t n = 1 + std::uint32_t(rng() % max_tokens);
        const std::uint32_t m = (rng() % 8 == 0) ? 1 + std::uint32_t(rng() % layers) : layers;
        for (std::uint32_t i = 0; i < n; ++i)
            st.tokens.push_back({std::uint32_t(rng() % 50000), std::uint32_t(s / 16), position++,
                                 static_cast<trace::Phase>(rng() % 3)});
        for (std::uint32_t l = 0; l < m; ++l) st.layers.push_back(std::uint16_t(l));
        for (std::uint32_t b = 0; b < m; ++b)
            for (std::uint32_t i = 0; i < n; ++i) {
                // k distinct experts, skewed towards low ids (a square of a uniform draw).
                std::vector<std::uint16_t> pick;
                while (pick.size() < k) {
                    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
                    const auto e = std::uint16_t(std::min<double>(experts - 1, u * u * experts));
                    if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
                }
                for (std::uint16_t e : pick) {
                    st.experts.push_back(e);
                    st.weights.push_back(std::uniform_real_distribution<float>(0.0f, 2.5f)(rng));
                }
            }
        t.steps.push_back(std::move(st));
    }
    return t;
}

}  // namespace aff::test
