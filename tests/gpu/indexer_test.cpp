// Device test: kernels/indexer.hip against the CPU forward's own indexer (aff::index_scores,
// aff::select_topk in libaff/model/attention_ops). Scores: tiny (4 heads × 128, top-4) and
// V4-Flash (64 heads × 128, top-512) geometry, decode and prefill chunks. Top-k: both sides
// get the same scores and must return identical index lists, on random scores, on scores
// with many ties (few distinct values, zeros of both signs), and with fewer candidates than k.
#include "device_test.hpp"

#include "aff/core/thread_pool.hpp"
#include "aff/model/attention_ops.hpp"
#include "kernels/indexer.hpp"

#include <cmath>

using namespace aff::gpu::test;

namespace {

struct Geometry {
    const char* name;
    int heads, dim, ratio, topk;
};

enum class Scores { random, ties };

void run_case(std::vector<Row>& rows, aff::ThreadPool& threads, const Geometry& g, std::int64_t start, int n, Scores kind) {
    const int count = static_cast<int>((start + n) / g.ratio), stride = std::max(count, 1);
    const std::vector<float> q = normal(static_cast<size_t>(n) * g.heads * g.dim);
    const std::vector<float> w = normal(static_cast<size_t>(n) * g.heads);
    const std::vector<float> keys = normal(static_cast<size_t>(stride) * g.dim);
    std::vector<float> want(static_cast<size_t>(n) * stride, 0.0f);
    aff::index_scores(threads, n, start, g.heads, g.dim, g.ratio, count, q.data(), w.data(), keys.data(), want.data(), stride);

    aff::gpu::Buffer dq = to_device(q), dw = to_device(w), dkeys = to_device(keys);
    aff::gpu::Buffer dscores = to_device(std::vector<float>(want.size(), 0.0f));
    aff::gpu::Stream s;
    aff::gpu::indexer_scores(dq.as<float>(), dw.as<float>(), dkeys.as<float>(), dscores.as<float>(), n, g.heads, g.dim,
                             start, g.ratio, count, stride, s.handle());
    s.synchronize();
    const std::vector<float> got = to_host<float>(dscores, want.size());
    const std::string what = std::string(g.name) + " start " + std::to_string(start) + " n " + std::to_string(n) + " (" +
                             std::to_string(count) + " keys)";
    if (kind == Scores::random) {
        add(rows, "indexer", what + " scores nmse", nmse(got, want), aff::gpu::indexer_scores_max_nmse);
        add(rows, "indexer", what + " scores max rel", max_rel(got, want), 1e-5);
    }

    // Top-k on identical scores: the CPU's own scores (ties: rounded to a few values).
    std::vector<float> scores = want;
    if (kind == Scores::ties)
        for (float& v : scores)  // −2, −1, −0, +0, 1, 2
            v = static_cast<float>(static_cast<int>(std::fabs(v) * 2.0f) % 3) * (v < 0 ? -1.0f : 1.0f);
    aff::gpu::Buffer dsc = to_device(scores), dsel = poisoned(static_cast<size_t>(n) * g.topk, sizeof(int32_t)),
                     dcnt = poisoned(n, sizeof(int32_t));
    aff::gpu::indexer_topk(dsc.as<float>(), n, stride, start, g.ratio, count, g.topk, dsel.as<int32_t>(),
                           dcnt.as<int32_t>(), s.handle());
    s.synchronize();
    const std::vector<int32_t> sel = to_host<int32_t>(dsel, static_cast<size_t>(n) * g.topk);
    const std::vector<int32_t> cnt = to_host<int32_t>(dcnt, n);
    std::vector<int32_t> expect(g.topk);
    int mismatches = 0;
    for (int t = 0; t < n; ++t) {
        const int keep = aff::select_topk(&scores[static_cast<size_t>(t) * stride],
                                          aff::visible_entries(count, start + t, g.ratio), g.topk, expect.data());
        mismatches += cnt[t] != keep;
        for (int i = 0; i < g.topk; ++i)
            mismatches += sel[static_cast<size_t>(t) * g.topk + i] != (i < keep ? expect[i] : -1);
    }
    add(rows, "indexer", what + (kind == Scores::ties ? " topk ties" : " topk") + " mismatches", mismatches, 0.0);
}

}  // namespace

AFF_DEVICE_TEST("indexer") {
    aff::ThreadPool threads;
    const Geometry tiny{"tiny", 4, 128, 4, 4};
    const Geometry flash{"flash", 64, 128, 4, 512};
    struct Span { std::int64_t start; int n; };
    for (const Geometry& g : {tiny, flash})
        for (Scores kind : {Scores::random, Scores::ties})
            for (const Span sp : {Span{0, 1}, Span{9, 1}, Span{1000, 1}, Span{1000, 4}, Span{0, 37}, Span{70001, 4},
                                  Span{70003, 37}})
                run_case(rows, threads, g, sp.start, sp.n, kind);
}
