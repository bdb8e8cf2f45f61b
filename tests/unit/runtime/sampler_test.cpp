// Tests for libaff/runtime/sampler: greedy choice, each filter's cut, seeding, and the
// reported log-probabilities against values computed by hand.
#include "libaff/core/error.hpp"
#include "libaff/runtime/sampler.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

using aff::Sampler;
using aff::SamplerParams;

namespace {
std::map<int, int> histogram(SamplerParams p, const std::vector<float>& logits, int draws) {
    Sampler s(p);
    std::map<int, int> h;
    for (int i = 0; i < draws; ++i) ++h[s.sample(logits)];
    return h;
}
}  // namespace

TEST_CASE("temperature 0 picks the largest logit, the lower id on a tie", "[runtime]") {
    SamplerParams p;
    p.temperature = 0;
    Sampler s(p);
    CHECK(s.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f}) == 1);
    CHECK(s.sample(std::vector<float>{3.0f, 1.0f, 3.0f}) == 0);
}

TEST_CASE("top_k keeps only the k most likely tokens", "[runtime]") {
    SamplerParams p;
    p.top_k = 2;
    p.seed = 7;
    const auto h = histogram(p, {1.0f, 0.9f, 0.8f, 1.1f}, 2000);
    CHECK(h.size() == 2);
    CHECK(h.count(0) == 1);
    CHECK(h.count(3) == 1);
}

TEST_CASE("top_p keeps the smallest set reaching the mass", "[runtime]") {
    // probabilities 0.5, 0.3, 0.2 (log-space logits)
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    SamplerParams p;
    p.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: tokens 0 and 1
    p.seed = 1;
    const auto h = histogram(p, logits, 4000);
    CHECK(h.size() == 2);
    CHECK(h.count(2) == 0);
    // within the kept set the ratio is 0.5 : 0.3
    CHECK(double(h.at(0)) / 4000 == Approx(0.625).margin(0.03));
    p.top_p = 0.0f;  // only the most likely token
    CHECK(histogram(p, logits, 200) == std::map<int, int>{{0, 200}});
}

TEST_CASE("min_p drops tokens below a fraction of the best", "[runtime]") {
    const std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
    SamplerParams p;
    p.min_p = 0.2f;  // floor 0.12: token 2 (0.1) goes
    p.seed = 3;
    const auto h = histogram(p, logits, 3000);
    CHECK(h.count(2) == 0);
    CHECK(h.count(1) == 1);
}

TEST_CASE("temperature reshapes the distribution", "[runtime]") {
    const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75 at T = 1
    SamplerParams p;
    p.seed = 11;
    auto h = histogram(p, logits, 8000);
    CHECK(double(h[1]) / 8000 == Approx(0.75).margin(0.02));
    p.temperature = 0.5f;  // p ∝ 1, 9: 0.9
    h = histogram(p, logits, 8000);
    CHECK(double(h[1]) / 8000 == Approx(0.9).margin(0.02));
}

TEST_CASE("the same seed gives the same tokens, another seed other tokens", "[runtime]") {
    std::vector<float> logits(64);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.1f;
    auto run = [&](std::uint64_t seed) {
        SamplerParams p;
        p.seed = seed;
        Sampler s(p);
        std::vector<int> out;
        for (int i = 0; i < 32; ++i) out.push_back(s.sample(logits));
        return out;
    };
    CHECK(run(42) == run(42));
    CHECK(run(42) != run(43));
}

TEST_CASE("out-of-range parameters are refused with the parameter's name", "[runtime]") {
    SamplerParams p;
    p.top_p = 1.5f;
    CHECK_THROWS_WITH(Sampler(p), Catch::Contains("top_p"));
    p = {};
    p.temperature = -1;
    CHECK_THROWS_WITH(Sampler(p), Catch::Contains("temperature"));
    p = {};
    p.min_p = 2;
    CHECK_THROWS_WITH(Sampler(p), Catch::Contains("min_p"));
}

TEST_CASE("logprobs are the log-softmax of the raw logits", "[runtime]") {
    const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
    const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
    CHECK(aff::token_logprob(logits, 1) == Approx(2.0 - lse));
    const auto top = aff::top_logprobs(logits, 2);
    REQUIRE(top.size() == 2);
    CHECK(top[0].token == 2);
    CHECK(top[0].logprob == Approx(3.0 - lse));
    CHECK(top[1].token == 1);
    CHECK(aff::top_logprobs(logits, 10).size() == 3);
}

TEST_CASE("the top logprobs are the k largest in order, ties by the lower id, NaN last", "[runtime]") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::mt19937 rng(9);
    std::uniform_int_distribution<int> v(-8, 8);
    for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> logits(300);
        for (float& x : logits) x = float(v(rng));  // many ties
        for (int j = 0; j < 5; ++j) logits[std::size_t(rng() % 300)] = nan;
        std::vector<std::int32_t> order(logits.size());
        std::iota(order.begin(), order.end(), 0);
        auto key = [&](std::int32_t i) { return std::isnan(logits[std::size_t(i)]) ? -1e30f : logits[std::size_t(i)]; };
        std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return key(a) > key(b); });
        for (std::size_t k : {0, 1, 7, 20}) {
            const auto top = aff::top_logprobs(logits, k);
            REQUIRE(top.size() == k);
            for (std::size_t i = 0; i < k; ++i) CHECK(top[i].token == order[i]);
        }
    }
}
