// Tests for libaff/model/router (the CPU forward's router, which the GPU router kernel is
// tested against): the bias only selects, weights renormalise and scale, hash layers take
// their tid2eid row, and without norm_topk_prob a weight is the scaled score.
#include "libaff/model/router.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using Catch::Matchers::WithinRel;

TEST_CASE("router: bias only selects, weights renormalise and scale, hash uses tid2eid", "[model]") {
    const aff::RouterShape c{8, 2, 1.5f, true};
    const std::vector<float> logits = {0.0f, 3.0f, 30.0f, -2.0f, 1.0f, 2.0f, -5.0f, 0.5f};
    auto s = [](double v) { return std::sqrt(v > 20.0 ? v : std::log1p(std::exp(v))); };
    std::vector<int32_t> ids(2);
    std::vector<float> wts(2);
    aff::route(logits.data(), 1, c, nullptr, nullptr, nullptr, ids.data(), wts.data());
    CHECK(ids == std::vector<int32_t>{2, 1});
    CHECK_THAT(wts[0], WithinRel(1.5 * s(30.0) / (s(30.0) + s(3.0)), 1e-6));

    // A bias of +10 on expert 6 puts it first; its weight still comes from its own score.
    std::vector<float> bias(8, 0.0f);
    bias[6] = 10.0f;
    aff::route(logits.data(), 1, c, bias.data(), nullptr, nullptr, ids.data(), wts.data());
    CHECK(ids == std::vector<int32_t>{6, 2});
    CHECK_THAT(wts[0], WithinRel(1.5 * s(-5.0) / (s(-5.0) + s(30.0)), 1e-6));
    CHECK_THAT(wts[0] + wts[1], WithinRel(1.5f, 1e-6f));

    // Hash layer: token 1's row, in table order, whatever the scores say.
    const std::vector<int32_t> tid2eid = {0, 1, 7, 3};
    const int32_t token = 1;
    aff::route(logits.data(), 1, c, bias.data(), tid2eid.data(), &token, ids.data(), wts.data());
    CHECK(ids == std::vector<int32_t>{7, 3});
    CHECK_THAT(wts[1], WithinRel(1.5 * s(-2.0) / (s(0.5) + s(-2.0)), 1e-6));

    // Without normalisation (norm_topk_prob false) a weight is its score times the scale;
    // keys are the selection's s + bias.
    std::vector<float> keys(8);
    aff::route(logits.data(), 1, {8, 2, 1.5f, false}, bias.data(), nullptr, nullptr, ids.data(), wts.data(), keys.data());
    CHECK(ids == std::vector<int32_t>{6, 2});
    CHECK_THAT(wts[0], WithinRel(1.5 * s(-5.0), 1e-6));
    CHECK_THAT(keys[6], WithinRel(s(-5.0) + 10.0, 1e-6));
    CHECK_THAT(keys[1], WithinRel(s(3.0), 1e-6));
}
