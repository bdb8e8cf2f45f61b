// Tests for runtime/sampled_pick.hpp, the rule of drawn picks that Sequence::forward_ids' host
// default and the GPU's speculative_rows share: a plain row is distributed as p = softmax(x/T),
// a row that verifies a guess drawn from q is too (accepting with min(1, p/q), the residual
// otherwise, never the rejected guess), both checked by Pearson's chi-square at a stated
// false-alarm rate with a broken control; the edge rows (p = q, q one-hot, a guess outside the
// candidates, NaN and -inf rows); and the positional draws' properties.
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/greedy_pick.hpp"
#include "libaff/runtime/sampled_pick.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace {

constexpr int kV = 8;

std::vector<double> softmax(const std::vector<float>& x, double t, std::size_t n = kV) {
    std::vector<double> p(x.size(), 0.0);
    double max = -INFINITY, sum = 0;
    for (std::size_t i = 0; i < n; ++i) max = std::max(max, double(x[i]));
    for (std::size_t i = 0; i < n; ++i) sum += p[i] = std::exp((double(x[i]) - max) / t);
    for (double& v : p) v /= sum;
    return p;
}

// Pearson's chi-square of counts against probabilities times draws (cells of probability 0
// must stay empty: returned as infinity otherwise).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
    double chi = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double expected = p[i] * draws;
        if (expected == 0) {
            if (counts[i] > 0) return INFINITY;
            continue;
        }
        REQUIRE(expected >= 5);  // the chi-square approximation holds
        chi += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    return chi;
}

// 8 cells, 7 degrees of freedom: P(chi-square > 33.38) = 1e-5 when the counts follow p.
constexpr double kCritical = 33.38;

const std::vector<float> kLogits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.7f};

}  // namespace

TEST_CASE("a plain drawn pick follows the tempered softmax", "[runtime]") {
    const int draws = 40000;
    for (const float t : {0.6f, 1.0f, 1.7f}) {
        INFO("temperature " << t);
        std::vector<int> counts(kV, 0);
        const std::vector<double> u = aff::positional_uniforms(5, 0, draws);
        for (int i = 0; i < draws; ++i) ++counts[std::size_t(aff::sampled_pick(kLogits, kV, t, -1, {}, u[2 * i], u[2 * i + 1]))];
        CHECK(chi_square(counts, softmax(kLogits, t), draws) < kCritical);
        // Control: against the untempered softmax the same counts fail (unless T is 1).
        if (t != 1.0f) CHECK(chi_square(counts, softmax(kLogits, 1.0), draws) > 10 * kCritical);
    }
}

TEST_CASE("a verify row's pick follows the target whatever the draft, and never returns a rejected guess",
          "[runtime]") {
    const int draws = 40000;
    const std::vector<double> p = softmax(kLogits, 1.0);
    const std::vector<std::vector<float>> drafts = {
        {0.40f, 0.05f, 0.05f, 0.10f, 0.15f, 0.05f, 0.10f, 0.10f},  // differs from p: both branches run
        {0.01f, 0.01f, 0.01f, 0.90f, 0.01f, 0.04f, 0.01f, 0.01f},  // sure of one id
        {0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f},
    };
    for (std::size_t d = 0; d < drafts.size(); ++d) {
        INFO("draft " << d);
        const std::vector<float>& q = drafts[d];
        std::discrete_distribution<int> from_q(q.begin(), q.end());
        std::mt19937_64 rng(d + 1);
        std::vector<int> counts(kV, 0), lied(kV, 0);
        std::size_t accepted = 0, rejected_returned = 0;
        const std::vector<double> u = aff::positional_uniforms(17 + d, 0, draws);
        for (int i = 0; i < draws; ++i) {
            const int g = from_q(rng);
            const std::int32_t pick = aff::sampled_pick(kLogits, kV, 1.0f, g, q, u[2 * i], u[2 * i + 1]);
            ++counts[std::size_t(pick)];
            const bool accepts = u[2 * i] * double(q[std::size_t(g)]) < p[std::size_t(g)];
            accepted += accepts;
            rejected_returned += !accepts && pick == g;
            // Control: the guess verified against a uniform q it was not drawn from.
            const std::vector<float> flat(kV, 1.0f / kV);
            ++lied[std::size_t(aff::sampled_pick(kLogits, kV, 1.0f, g, flat, u[2 * i], u[2 * i + 1]))];
        }
        CHECK(chi_square(counts, p, draws) < kCritical);
        CHECK(rejected_returned == 0);
        CHECK(accepted > 0);
        if (d != 2) CHECK(accepted < std::size_t(draws));
        if (d != 2) CHECK(chi_square(lied, p, draws) > 10 * kCritical);  // the flat draft is honest for d = 2
    }
}

TEST_CASE("drawn picks at the edges: p = q, a one-hot q, a guess outside the candidates, NaN and -inf rows",
          "[runtime]") {
    const std::vector<double> p = softmax(kLogits, 1.0);
    std::vector<float> q(p.begin(), p.end());
    // q = p: always accepted (u·q < p for every u < 1 where the float rounding keeps q <= p).
    int accepted = 0;
    const std::vector<double> u = aff::positional_uniforms(3, 0, 200);
    for (int i = 0; i < 200; ++i) {
        const std::int32_t g = i % kV;
        if (double(q[std::size_t(g)]) > p[std::size_t(g)]) continue;
        accepted += aff::sampled_pick(kLogits, kV, 1.0f, g, q, u[2 * i], u[2 * i + 1]) == g;
        CHECK(aff::sampled_pick(kLogits, kV, 1.0f, g, q, u[2 * i], u[2 * i + 1]) == g);
    }
    CHECK(accepted > 0);
    // A one-hot q at g: kept with probability p(g) (u below it), else a draw from p less g.
    std::vector<float> one_hot(kV, 0.0f);
    one_hot[3] = 1.0f;
    CHECK(aff::sampled_pick(kLogits, kV, 1.0f, 3, one_hot, p[3] * 0.99, 0.5) == 3);
    CHECK(aff::sampled_pick(kLogits, kV, 1.0f, 3, one_hot, p[3] * 1.01 > 1 ? 0.999 : p[3] * 1.01, 0.5) != 3);
    // Candidates cut the row: a guess past the cut has p 0 and is never kept; nothing past the
    // cut is drawn.
    std::vector<float> wide(kV, 1.0f / kV);
    for (int i = 0; i < 100; ++i) {
        CHECK(aff::sampled_pick(kLogits, 5, 1.0f, 6, wide, u[2 * i], u[2 * i + 1]) < 5);
        CHECK(aff::sampled_pick(kLogits, 5, 1.0f, -1, {}, u[2 * i], u[2 * i + 1]) < 5);
    }
    // NaN has no mass; a row of NaN and -inf only gives id 0.
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> holes = {nan, 1.0f, nan, -inf, 2.0f, nan, nan, nan};
    for (int i = 0; i < 100; ++i) {
        const std::int32_t pick = aff::sampled_pick(holes, kV, 1.0f, -1, {}, u[2 * i], u[2 * i + 1]);
        CHECK((pick == 1 || pick == 4));
    }
    const std::vector<float> none = {nan, -inf, nan, -inf, -inf, nan, -inf, nan};
    CHECK(aff::sampled_pick(none, kV, 1.0f, -1, {}, 0.3, 0.7) == 0);
    CHECK(aff::sampled_pick(none, kV, 1.0f, 2, wide, 0.3, 0.7) == 0);
}

TEST_CASE("positional draws depend on the seed and the position only, and row_picks chooses the rule", "[runtime]") {
    const std::vector<double> whole = aff::positional_uniforms(42, 10, 6);
    REQUIRE(whole.size() == 12);
    for (double x : whole) {
        CHECK(x >= 0.0);
        CHECK(x < 1.0);
    }
    // Split into calls anywhere, the same draws for the same positions.
    const std::vector<double> head = aff::positional_uniforms(42, 10, 2), tail = aff::positional_uniforms(42, 12, 4);
    std::vector<double> joined = head;
    joined.insert(joined.end(), tail.begin(), tail.end());
    CHECK(joined == whole);
    // Two draws of a row differ, rows differ, seeds differ.
    std::set<double> distinct(whole.begin(), whole.end());
    CHECK(distinct.size() == whole.size());
    CHECK(aff::positional_uniforms(43, 10, 6) != whole);
    // A mean near 1/2 over many positions (a gross check of the generator: 1e5 draws, sd 9e-4).
    const std::vector<double> many = aff::positional_uniforms(7, 0, 50000);
    double mean = 0;
    for (double x : many) mean += x;
    mean /= double(many.size());
    CHECK(std::fabs(mean - 0.5) < 0.005);

    // row_picks: greedy without a rule, drawn with one (every row plain without a drafter).
    std::vector<float> rows(kLogits.begin(), kLogits.end());
    rows.insert(rows.end(), kLogits.rbegin(), kLogits.rend());
    const std::int32_t tokens[2] = {0, 1};
    CHECK(aff::row_picks(rows, kV, kV, tokens, nullptr) == aff::greedy_picks(rows, kV, kV));
    const std::vector<double> u = {0.1, 0.2, 0.3, 0.9};
    const aff::RowSampling s{1.0f, u, nullptr};
    const std::vector<std::int32_t> drawn = aff::row_picks(rows, kV, kV, tokens, &s);
    CHECK(drawn == std::vector<std::int32_t>{aff::sampled_pick(std::span(rows).first(kV), kV, 1.0f, -1, {}, 0.1, 0.2),
                                             aff::sampled_pick(std::span(rows).last(kV), kV, 1.0f, -1, {}, 0.3, 0.9)});
}
