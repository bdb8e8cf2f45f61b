// What sampling a token costs on the host at V4-Flash's vocabulary (129 280 ids): Sampler::
// sample and Sampler::distribution (a speculative acceptance's p) for the sampling settings
// users run (aff-run's default: temperature 1, no filter; top-p 0.95; top-k 40; min-p 0.05),
// against the peer measured in the same run, the sorted definition the sampler had before
// (every id sorted by logit, then the filters as prefix cuts), and the bound, one pass of
// exp over the row (the least an exact sampler over the tempered softmax does). Logits of a
// trained model's shape are not at hand: the rows are a normal of sd 3 (flat, the hard case
// for anything that sorts only what it needs) and one of sd 3 with a peaked head.
//     sampler_bench [REPS]   (default 40)
#include "libaff/runtime/sampler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The sorted definition: one full sort a call, then the filters as prefix cuts and the draw.
std::int32_t sorted_sample(const std::vector<float>& l, const aff::SamplerParams& p, double u,
                           std::vector<std::int32_t>& order, std::vector<double>& w) {
    order.resize(l.size());
    std::iota(order.begin(), order.end(), 0);
    auto cmp = [&](std::int32_t a, std::int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; };
    std::size_t keep = l.size();
    if (p.top_k > 0) {
        keep = std::size_t(p.top_k);
        std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), cmp);
    } else {
        std::sort(order.begin(), order.end(), cmp);
    }
    w.resize(keep);
    const double top = l[std::size_t(order[0])];
    for (std::size_t i = 0; i < keep; ++i) w[i] = std::exp((l[std::size_t(order[i])] - top) / p.temperature);
    if (p.min_p > 0) {
        std::size_t k = 1;
        while (k < keep && w[k] >= p.min_p) ++k;
        keep = k;
    }
    if (p.top_p < 1) {
        double kept = 0, mass = 0;
        for (std::size_t i = 0; i < keep; ++i) kept += w[i];
        std::size_t k = 0;
        while (k < keep) {
            mass += w[k++];
            if (mass >= p.top_p * kept) break;
        }
        keep = k;
    }
    double total = 0, acc = 0;
    for (std::size_t i = 0; i < keep; ++i) total += w[i];
    for (std::size_t i = 0; i < keep; ++i)
        if (u * total < (acc += w[i])) return order[i];
    return order[keep - 1];
}

}  // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::max(5, std::atoi(argv[1])) : 40;
    constexpr std::size_t V = 129280;
    std::mt19937 rng(3);
    std::normal_distribution<float> n(0.0f, 3.0f);
    std::vector<float> flat(V), peaked(V);
    for (std::size_t i = 0; i < V; ++i) peaked[i] = flat[i] = n(rng);
    for (int i = 0; i < 8; ++i) peaked[std::size_t(rng() % V)] = 25.0f - float(i);
    struct Setting {
        const char* name;
        float temperature, top_p, min_p;
        int top_k;
    };
    const Setting settings[] = {{"T 1 (aff-run's default)", 1.0f, 1.0f, 0.0f, 0},
                                {"T 0.8, top-p 0.95", 0.8f, 0.95f, 0.0f, 0},
                                {"T 0.8, top-k 40", 0.8f, 1.0f, 0.0f, 40},
                                {"T 0.8, min-p 0.05", 0.8f, 1.0f, 0.05f, 0}};
    std::printf("%-26s %-7s %12s %12s %14s %12s %8s\n", "setting", "row", "sample ms", "dist. ms", "sorted (peer)",
                "bound ms", "agree");
    std::vector<std::int32_t> order;
    std::vector<double> w;
    std::vector<float> q, e(V);
    for (const Setting& s : settings)
        for (int r = 0; r < 2; ++r) {
            std::vector<float> l = r == 0 ? flat : peaked;
            aff::SamplerParams p;
            p.temperature = s.temperature;
            p.top_p = s.top_p;
            p.min_p = s.min_p;
            p.top_k = s.top_k;
            p.seed = 11;
            aff::Sampler sampler(p), same(p);
            std::vector<double> a, b, c, d;
            int agree = 0;
            for (int i = 0; i < reps; ++i) {
                l[std::size_t(i) % V] += 1e-3f;  // a new row each time
                auto t0 = Clock::now();
                const std::int32_t got = sampler.sample(l);
                a.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
                t0 = Clock::now();
                sampler.distribution(l, q);
                b.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
                const double u = same.uniform();  // the draw sample() made
                t0 = Clock::now();
                const std::int32_t want = sorted_sample(l, p, u, order, w);
                c.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
                agree += got == want;
                t0 = Clock::now();
                const float top = *std::max_element(l.begin(), l.end());
                for (std::size_t k = 0; k < V; ++k) e[k] = std::exp((l[k] - top) / p.temperature);
                d.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            }
            std::printf("%-26s %-7s %12.3f %12.3f %14.3f %12.3f %5d/%d\n", s.name, r == 0 ? "flat" : "peaked", median(a),
                        median(b), median(c), median(d), agree, reps);
        }
    std::printf("\n(agree: draws equal to the sorted definition's on the same uniform)\n");
    return 0;
}
