// Device test: kernels/attention.hip against the CPU forward's own attention (aff::attend,
// aff::ring_store in libaff/model/attention_ops), on tiny geometries (4 heads × 128, the
// fixtures' 4 × 64 and 8 × 32, an odd head count × 256) and V4-Flash's (64 heads × 512,
// window 128, CSA top-512, HCA ratio 128), for the sliding, CSA (explicit selection) and HCA
// (every visible entry) kinds, decode (1 and 4 tokens) and prefill chunks from position 0 and
// from the middle of a sequence; each case with and without decode scratch (keys split into
// ranges and merged by a second kernel).
#include "device_test.hpp"

#include "aff/core/thread_pool.hpp"
#include "aff/model/attention_ops.hpp"
#include "kernels/attention.hpp"

#include <algorithm>
#include <numeric>

using namespace aff::gpu::test;

namespace {

struct Geometry {
    const char* name;
    int heads, head_dim, window, csa_ratio, hca_ratio, topk;
};

enum class Kind { sliding, csa, hca };

// Distinct random indices into [0, visible), at most k of them, per token.
void random_selection(int n, std::int64_t start, int count, int ratio, int k, std::vector<int32_t>& index,
                      std::vector<int32_t>& index_count) {
    index.assign(static_cast<size_t>(n) * k, -1);
    index_count.assign(n, 0);
    std::vector<int32_t> pool;
    for (int t = 0; t < n; ++t) {
        const int vis = aff::visible_entries(count, start + t, ratio);
        pool.resize(vis);
        std::iota(pool.begin(), pool.end(), 0);
        const int take = std::min(k, vis);
        for (int i = 0; i < take; ++i) {
            std::uniform_int_distribution<int> pick(i, vis - 1);
            std::swap(pool[i], pool[pick(rng())]);
            index[static_cast<size_t>(t) * k + i] = pool[i];
        }
        index_count[t] = take;
    }
}

void run_case(std::vector<Row>& rows, aff::ThreadPool& threads, const Geometry& g, Kind kind, std::int64_t start, int n) {
    const int H = g.heads, Dh = g.head_dim, W = g.window;
    const int ratio = kind == Kind::csa ? g.csa_ratio : g.hca_ratio;
    const int count = kind == Kind::sliding ? 0 : static_cast<int>((start + n) / ratio);
    const std::vector<float> q = normal(static_cast<size_t>(n) * H * Dh, 0.0f, 2.0f);
    const std::vector<float> kv = normal(static_cast<size_t>(n) * Dh);
    const std::vector<float> ring = normal(static_cast<size_t>(W) * Dh);
    const std::vector<float> entries = normal(static_cast<size_t>(std::max(count, 1)) * Dh);
    const std::vector<float> sink = normal(H);
    std::vector<int32_t> index, index_count;
    if (kind == Kind::csa) random_selection(n, start, count, ratio, g.topk, index, index_count);

    aff::AttendEntries en;
    if (kind != Kind::sliding) en = {entries.data(), count, ratio};
    if (kind == Kind::csa) {
        en.index = index.data();
        en.index_count = index_count.data();
        en.stride = g.topk;
    }
    std::vector<float> want(static_cast<size_t>(n) * H * Dh);
    aff::attend(threads, aff::AttendShape{n, H, Dh, W, start}, q.data(), kv.data(), ring.data(), en, sink.data(),
                want.data());
    std::vector<float> want_ring = ring;
    aff::ring_store(want_ring.data(), kv.data(), n, Dh, W, start);

    aff::gpu::Buffer dq = to_device(q), dkv = to_device(kv), dring = to_device(ring), dent = to_device(entries),
                     dsink = to_device(sink), dout = poisoned(want.size());
    aff::gpu::Buffer dindex, dcount;
    aff::gpu::AttentionArgs a;
    a.q = dq.as<float>();
    a.kv = dkv.as<float>();
    a.ring = dring.as<float>();
    a.sink = dsink.as<float>();
    a.out = dout.as<float>();
    a.n = n;
    a.heads = H;
    a.head_dim = Dh;
    a.window = W;
    a.start = start;
    if (kind != Kind::sliding) {
        a.entries = dent.as<float>();
        a.entry_count = count;
        a.ratio = ratio;
    }
    if (kind == Kind::csa) {
        dindex = to_device(index);
        dcount = to_device(index_count);
        a.selected = dindex.as<int32_t>();
        a.selected_count = dcount.as<int32_t>();
        a.selected_stride = g.topk;
    }
    aff::gpu::Stream s;
    // Split path first (decode: the keys cut into ranges, merged by the combine kernel).
    aff::gpu::Buffer scratch = poisoned(aff::gpu::attention_scratch_bytes(n, H, Dh) / sizeof(float));
    a.scratch = scratch.as<float>();
    const int splits = aff::gpu::attention_splits(a);
    aff::gpu::attention(a, s.handle());
    s.synchronize();
    const std::vector<float> got_split = to_host<float>(dout, want.size());
    dout = poisoned(want.size());
    a.out = dout.as<float>();
    a.scratch = nullptr;
    aff::gpu::attention(a, s.handle());
    aff::gpu::ring_store(dring.as<float>(), dkv.as<float>(), n, Dh, W, start, s.handle());
    s.synchronize();
    const std::vector<float> got = to_host<float>(dout, want.size());
    const std::vector<float> got_ring = to_host<float>(dring, want_ring.size());

    const char* kinds[] = {"sliding", "csa", "hca"};
    const std::string what = std::string(g.name) + " " + kinds[static_cast<int>(kind)] + " start " +
                             std::to_string(start) + " n " + std::to_string(n) + " (" + std::to_string(count) + " entries)";
    add(rows, "attention", what + " nmse", nmse(got, want), aff::gpu::attention_max_nmse);
    add(rows, "attention", what + " max rel", max_rel(got, want), 1e-5);
    add(rows, "attention", what + " ring", nmse(got_ring, want_ring), 0.0);
    const std::string split_what = what + " " + std::to_string(splits) + " splits";
    add(rows, "attention", split_what + " nmse", nmse(got_split, want), aff::gpu::attention_max_nmse);
    add(rows, "attention", split_what + " max rel", max_rel(got_split, want), 1e-5);
    // Decode at V4-Flash geometry must take the split path (else it went untested).
    if (H == 64 && n <= 4 && start > 1000) add(rows, "attention", what + " used splits", splits > 1 ? 0.0 : 1.0, 0.0);
}

}  // namespace

AFF_DEVICE_TEST("attention") {
    aff::ThreadPool threads;
    const Geometry tiny{"tiny", 4, 128, 16, 4, 16, 4};
    const Geometry tiny_a{"tiny-a", 4, 64, 16, 4, 16, 4};     // the fixtures' shapes
    const Geometry tiny_c{"tiny-c", 8, 32, 8, 4, 16, 4};
    const Geometry odd{"odd-heads", 3, 256, 16, 4, 16, 8};    // one head a block
    const Geometry flash{"flash", 64, 512, 128, 4, 128, 512};
    struct Span { std::int64_t start; int n; };
    for (const Geometry& g : {tiny, tiny_a, tiny_c, odd, flash}) {
        const std::int64_t far = g.heads == 64 ? 70001 : 301;  // flash: 546 HCA entries, 17500 CSA candidates
        for (Kind kind : {Kind::sliding, Kind::csa, Kind::hca})
            for (const Span sp : {Span{0, 1}, Span{5, 1}, Span{far, 1}, Span{far, 4}, Span{0, 37}, Span{far + 3, 37}})
                run_case(rows, threads, g, kind, sp.start, sp.n);
    }
}
