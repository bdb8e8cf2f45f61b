// Device test: kernels/indexer.hip against the CPU forward's own indexer (aff::index_scores,
// aff::select_topk in libaff/model/attention_ops). Scores: tiny (4 heads × 128, top-4) and
// V4-Flash (64 heads × 128, top-512) geometry, decode and prefill chunks. Top-k: both sides
// get the same scores and must return identical index lists, on random scores, on scores
// with many ties (few distinct values, zeros of both signs), and with fewer candidates than k.
// indexer_batch: 4 sequences (own keys and positions, start on the host or the device) in one
// pair of launches, against the CPU and bit for bit against each sequence alone.
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

void run_batch(std::vector<Row>& rows, aff::ThreadPool& threads, const Geometry& g, bool device_start) {
    const std::int64_t starts[4] = {70001, 9, 1000, 0};
    const int ns[4] = {1, 1, 2, 1};
    int rows_total = 0;
    for (int n : ns) rows_total += n;
    int stride = 1;
    for (int i = 0; i < 4; ++i) stride = std::max(stride, static_cast<int>((starts[i] + ns[i]) / g.ratio));
    const std::vector<float> q = normal(static_cast<size_t>(rows_total) * g.heads * g.dim);
    const std::vector<float> w = normal(static_cast<size_t>(rows_total) * g.heads);
    aff::gpu::Buffer dq = to_device(q), dw = to_device(w);
    aff::gpu::Buffer dscores = poisoned(static_cast<size_t>(rows_total) * stride), dsel = poisoned(static_cast<size_t>(rows_total) * g.topk, 4),
                     dcnt = poisoned(rows_total, 4);
    aff::gpu::Buffer ascores = poisoned(static_cast<size_t>(rows_total) * stride), asel = poisoned(static_cast<size_t>(rows_total) * g.topk, 4),
                     acnt = poisoned(rows_total, 4);
    std::vector<std::vector<float>> keys(4);
    std::vector<aff::gpu::Buffer> dkeys(4);
    std::vector<int32_t> start_host(4);
    for (int i = 0; i < 4; ++i) start_host[i] = static_cast<int32_t>(starts[i]);
    aff::gpu::Buffer dstarts = to_device(start_host);
    std::vector<aff::gpu::IndexerSeq> seqs(4);
    aff::gpu::Stream s;
    int row = 0;
    for (int i = 0; i < 4; ++i) {
        const int count = static_cast<int>((starts[i] + ns[i]) / g.ratio);
        keys[i] = normal(static_cast<size_t>(std::max(count, 1)) * g.dim);
        dkeys[i] = to_device(keys[i]);
        aff::gpu::IndexerSeq& sq = seqs[i];
        sq.keys = dkeys[i].as<float>();
        sq.row = row;
        sq.n = ns[i];
        sq.start = device_start ? 0 : starts[i];
        sq.start_at = device_start ? dstarts.as<int32_t>() + i : nullptr;
        sq.count = count;
        // Alone, into rows of the same layout in separate buffers.
        const size_t qoff = static_cast<size_t>(row) * g.heads * g.dim;
        aff::gpu::indexer_scores(dq.as<float>() + qoff, dw.as<float>() + static_cast<size_t>(row) * g.heads, sq.keys,
                                 ascores.as<float>() + static_cast<size_t>(row) * stride, sq.n, g.heads, g.dim, sq.start,
                                 g.ratio, count, stride, s.handle(), sq.start_at);
        aff::gpu::indexer_topk(ascores.as<float>() + static_cast<size_t>(row) * stride, sq.n, stride, sq.start, g.ratio,
                               count, g.topk, asel.as<int32_t>() + static_cast<size_t>(row) * g.topk, acnt.as<int32_t>() + row,
                               s.handle(), sq.start_at);
        row += ns[i];
    }
    aff::gpu::indexer_batch(dq.as<float>(), dw.as<float>(), dscores.as<float>(), dsel.as<int32_t>(), dcnt.as<int32_t>(),
                            seqs.data(), 4, g.heads, g.dim, g.ratio, stride, g.topk, s.handle());
    s.synchronize();
    const std::vector<float> got = to_host<float>(dscores, static_cast<size_t>(rows_total) * stride);
    const std::vector<float> alone = to_host<float>(ascores, got.size());
    const std::vector<int32_t> sel = to_host<int32_t>(dsel, static_cast<size_t>(rows_total) * g.topk);
    const std::vector<int32_t> sel_alone = to_host<int32_t>(asel, sel.size());
    const std::vector<int32_t> cnt = to_host<int32_t>(dcnt, rows_total), cnt_alone = to_host<int32_t>(acnt, rows_total);
    double worst = 0.0, differing = 0.0;
    int mismatches = 0;
    std::vector<int32_t> expect(g.topk);
    for (int i = 0; i < 4; ++i) {
        const int count = seqs[i].count, r0 = seqs[i].row;
        std::vector<float> want(static_cast<size_t>(ns[i]) * stride, 0.0f);
        aff::index_scores(threads, ns[i], starts[i], g.heads, g.dim, g.ratio, count, q.data() + static_cast<size_t>(r0) * g.heads * g.dim,
                          w.data() + static_cast<size_t>(r0) * g.heads, keys[i].data(), want.data(), stride);
        for (int t = 0; t < ns[i]; ++t) {
            const int vis = aff::visible_entries(count, starts[i] + t, g.ratio);
            const size_t at = static_cast<size_t>(r0 + t) * stride;
            std::vector<float> gv(got.begin() + static_cast<std::ptrdiff_t>(at), got.begin() + static_cast<std::ptrdiff_t>(at + vis));
            std::vector<float> wv(want.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * stride),
                                  want.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * stride + vis));
            if (vis > 0) worst = std::max(worst, nmse(gv, wv));
            for (int e = 0; e < vis; ++e)
                if (!(got[at + e] == alone[at + e])) differing += 1.0;
            // The selection from the device's own scores, as the CPU makes it.
            const int keep = aff::select_topk(&got[at], vis, g.topk, expect.data());
            const size_t so = static_cast<size_t>(r0 + t) * g.topk;
            mismatches += cnt[r0 + t] != keep;
            mismatches += cnt[r0 + t] != cnt_alone[r0 + t];
            for (int k = 0; k < g.topk; ++k) {
                mismatches += sel[so + k] != (k < keep ? expect[k] : -1);
                mismatches += sel[so + k] != sel_alone[so + k];
            }
        }
    }
    const std::string what = std::string(g.name) + " batch of 4" + (device_start ? " (start on the device)" : "");
    add(rows, "indexer", what + " scores nmse", worst, aff::gpu::indexer_scores_max_nmse);
    add(rows, "indexer", what + " scores differing from alone", differing, 0.0);
    add(rows, "indexer", what + " topk mismatches", mismatches, 0.0);
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
    for (const Geometry& g : {tiny, flash})
        for (bool device_start : {false, true}) run_batch(rows, threads, g, device_start);
}
