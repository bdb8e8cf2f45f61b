// Tests for runtime/kept_set.hpp against the sampler's definition written out the slow way
// (every id sorted, larger logit first then lower id; softmax at the temperature; top-k, min-p
// relative to the top, top-p the smallest prefix reaching the mass; the draw the first token
// in that order whose running sum exceeds u·total): on rows of many shapes (flat, peaked,
// heavy ties, NaN and -inf entries, a lone finite value) and every combination of the
// filters, the kept ids are the same, the distribution agrees to float rounding, and the draw
// for a grid of uniforms is the same token wherever u is not within rounding of a boundary.
#include "libaff/runtime/kept_set.hpp"
#include "libaff/runtime/sampler.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace {

struct Reference {
    std::vector<std::int32_t> order;  // kept, in order
    std::vector<double> weight;       // theirs
    double total = 0;
};

Reference reference(const std::vector<float>& l, const aff::SamplerParams& p) {
    std::vector<std::int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](std::int32_t i) { return std::isnan(l[std::size_t(i)]) ? -INFINITY : l[std::size_t(i)]; };
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return key(a) > key(b); });
    std::size_t keep = order.size();
    if (p.top_k > 0) keep = std::min(keep, std::size_t(p.top_k));
    const double top = key(order[0]);
    Reference r;
    for (std::size_t i = 0; i < keep; ++i) {
        const double w = std::isnan(l[std::size_t(order[i])]) ? 0.0 : std::exp((key(order[i]) - top) / p.temperature);
        r.order.push_back(order[i]);
        r.weight.push_back(w);
    }
    // Ids of no weight are never drawn: drop them from the tail (they sort last).
    while (r.order.size() > 1 && r.weight.back() == 0) {
        r.order.pop_back();
        r.weight.pop_back();
    }
    if (p.min_p > 0) {
        std::size_t k = 1;
        while (k < r.order.size() && r.weight[k] >= p.min_p) ++k;
        r.order.resize(k);
        r.weight.resize(k);
    }
    if (p.top_p < 1) {
        double kept = 0, mass = 0;
        for (double w : r.weight) kept += w;
        std::size_t k = 0;
        while (k < r.order.size()) {
            mass += r.weight[k];
            ++k;
            if (mass >= p.top_p * kept) break;
        }
        r.order.resize(k);
        r.weight.resize(k);
    }
    for (double w : r.weight) r.total += w;
    return r;
}

std::vector<std::vector<float>> rows() {
    std::mt19937 rng(5);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::vector<std::vector<float>> out;
    for (float sd : {0.5f, 3.0f, 8.0f}) {
        std::normal_distribution<float> n(0.0f, sd);
        std::vector<float> r(3001);
        for (float& x : r) x = n(rng);
        out.push_back(r);
    }
    std::vector<float> peaked(3001, -20.0f);
    peaked[17] = 5.0f;
    peaked[2900] = 4.5f;
    peaked[40] = 3.0f;
    out.push_back(peaked);
    std::vector<float> ties = out[1];
    for (float& x : ties) x = std::round(x);
    out.push_back(ties);
    std::vector<float> holes = out[1];
    for (std::size_t i = 0; i < holes.size(); i += 13) holes[i] = nan;
    for (std::size_t i = 5; i < holes.size(); i += 17) holes[i] = -inf;
    out.push_back(holes);
    std::vector<float> lone(200, -inf);
    lone[150] = -3.0f;
    out.push_back(lone);
    return out;
}

}  // namespace

TEST_CASE("the kept set without a full sort is the sorted definition's", "[runtime]") {
    const auto all = rows();
    std::size_t cases = 0, draws = 0;
    for (std::size_t r = 0; r < all.size(); ++r)
        for (float t : {0.5f, 1.0f, 1.7f})
            for (int top_k : {0, 5, 200})
                for (float top_p : {1.0f, 0.9f, 0.5f})
                    for (float min_p : {0.0f, 0.05f}) {
                        aff::SamplerParams p;
                        p.temperature = t;
                        p.top_k = top_k;
                        p.top_p = top_p;
                        p.min_p = min_p;
                        INFO("row " << r << " T " << t << " top_k " << top_k << " top_p " << top_p << " min_p " << min_p);
                        const std::vector<float>& l = all[r];
                        const Reference want = reference(l, p);
                        aff::KeptSet got;
                        got.build(l, p);
                        std::vector<float> dist;
                        got.fill(dist);
                        // The same ids, but for those whose weight underflows a float in one and
                        // not the other (probability below 1e-30: never drawn).
                        std::vector<double> want_p(l.size(), 0.0);
                        for (std::size_t j = 0; j < want.order.size(); ++j)
                            want_p[std::size_t(want.order[j])] = want.weight[j] / want.total;
                        std::size_t differ = 0;
                        for (std::size_t i = 0; i < dist.size(); ++i)
                            if ((dist[i] > 0) != (want_p[i] > 0) && std::max(double(dist[i]), want_p[i]) >= 1e-30) ++differ;
                        REQUIRE(differ == 0);
                        CHECK(got.total() == Approx(want.total).epsilon(1e-5));
                        double worst = 0;
                        for (std::size_t j = 0; j < want.order.size(); ++j)
                            worst = std::max(worst, std::fabs(dist[std::size_t(want.order[j])] - want.weight[j] / want.total));
                        CHECK(worst < 1e-6);
                        // Draws on a grid of uniforms, in the same order (the reference's tail of
                        // weights a float cannot hold is never reached: u < 1 - 1e-30).
                        for (int k = 0; k < 64; ++k) {
                            const double u = (k + 0.5) / 64.0;
                            double acc = 0, nearest = 1;
                            std::int32_t ref = want.order.back();
                            bool found = false;
                            for (std::size_t j = 0; j < want.order.size(); ++j) {
                                nearest = std::min(nearest, std::fabs(acc / want.total - u));
                                acc += want.weight[j];
                                if (!found && u * want.total < acc) {
                                    ref = want.order[j];
                                    found = true;
                                }
                            }
                            if (nearest < 1e-5) continue;  // within rounding of a boundary
                            CHECK(got.at(u * got.total()) == ref);
                            ++draws;
                        }
                        ++cases;
                    }
    CHECK(cases == all.size() * 54);
    CHECK(draws > 20000);
}

TEST_CASE("the sampler's draws and distributions come from the kept set", "[runtime]") {
    // A row whose sorted order differs from id order: the draw walks larger logits first.
    const std::vector<float> l = {0.0f, 3.0f, 1.0f, 2.0f};
    aff::SamplerParams p;
    p.temperature = 1.0f;
    aff::Sampler s(p);
    std::vector<float> q;
    s.distribution(l, q);
    double z = 0;
    for (float x : l) z += std::exp(double(x));
    for (std::size_t i = 0; i < l.size(); ++i) CHECK(q[i] == Approx(std::exp(double(l[i])) / z).epsilon(1e-6));
    aff::KeptSet k;
    k.build(l, p);
    CHECK(k.at(0.0) == 1);                         // the largest first
    CHECK(k.at(k.total() * 0.999999) == 0);       // the smallest last
}
