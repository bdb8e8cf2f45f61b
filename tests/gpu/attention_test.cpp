// Device test: kernels/attention.hip against the CPU forward's own attention (aff::attend,
// aff::ring_store in libaff/model/attention_ops), on tiny geometries (4 heads × 128, the
// fixtures' 4 × 64 and 8 × 32, an odd head count × 256) and V4-Flash's (64 heads × 512,
// window 128, CSA top-512, HCA ratio 128), for the sliding, CSA (explicit selection) and HCA
// (every visible entry) kinds, decode (1 and 4 tokens) and prefill chunks from position 0 and
// from the middle of a sequence; each case with and without decode scratch (the decode kernel:
// all heads of a token against each key tile, keys split into ranges merged by a second kernel),
// and at V4-Flash geometry the decode kernel once more with each tile size forced (8 and 32
// keys a tile; the default picks 8 for sliding and small CSA bounds, 32 otherwise).
// attention_batch: 4 sequences at different positions in one launch (start on the host or read
// on the device), each equal bit for bit to the sequence alone, rings stored in the launch.
// Block mode (ring_first, DSpark's draft block) against aff::attend_block: several block
// sizes, rings not yet full (the first position, a start inside the first window, a
// ring_first after a restart) and full, on every geometry; the ring is left as it was.
#include "device_test.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/kernel_cases.hpp"
#include "libaff/model/attention_ops.hpp"
#include "kernels/attention.hpp"

#include <algorithm>
#include <utility>

using namespace aff::gpu::test;

namespace {

struct Geometry {
    const char* name;
    int heads, head_dim, window, csa_ratio, hca_ratio, topk;
};

using Kind = aff::AttentionKind;

// tile: 0 lets the decode kernel choose its tile; 8 or 32 forces it (then only the decode
// kernel's rows are added).
void run_case(std::vector<Row>& rows, aff::ThreadPool& threads, const Geometry& g, Kind kind, std::int64_t start, int n,
              int tile = 0) {
    const int H = g.heads, Dh = g.head_dim, W = g.window;
    const int ratio = kind == Kind::csa ? g.csa_ratio : g.hca_ratio;
    const aff::gpu::AttentionInputs in =
        aff::gpu::random_attention_inputs(rng(), aff::AttendShape{n, H, Dh, W, start}, kind, ratio, g.topk, 2.0f);
    const int count = in.count;
    std::vector<float> want(static_cast<size_t>(n) * H * Dh);
    aff::attend(threads, in.shape, in.q.data(), in.kv.data(), in.ring.data(), in.attend_entries(), in.sink.data(),
                want.data());
    std::vector<float> want_ring = in.ring;
    aff::ring_store(want_ring.data(), in.kv.data(), n, Dh, W, start);

    aff::gpu::AttentionDeviceCase dev(in);
    aff::gpu::Buffer dout = poisoned(want.size());
    aff::gpu::AttentionArgs& a = dev.args;
    a.out = dout.as<float>();
    aff::gpu::Stream s;
    // Split path first (decode: the keys cut into ranges, merged by the combine kernel).
    aff::gpu::Buffer scratch = poisoned(aff::gpu::attention_scratch_bytes(n, H, Dh) / sizeof(float));
    a.scratch = scratch.as<float>();
    a.decode_tile = tile;
    const int splits = aff::gpu::attention_splits(a);
    const int used_tile = aff::gpu::attention_tile(a);
    aff::gpu::attention(a, s.handle());
    s.synchronize();
    const std::vector<float> got_split = to_host<float>(dout, want.size());
    dout = poisoned(want.size());
    a.out = dout.as<float>();
    a.scratch = nullptr;
    aff::gpu::attention(a, s.handle());
    aff::gpu::ring_store(dev.ring.as<float>(), dev.kv.as<float>(), n, Dh, W, start, s.handle());
    s.synchronize();
    const std::vector<float> got = to_host<float>(dout, want.size());
    const std::vector<float> got_ring = to_host<float>(dev.ring, want_ring.size());

    const char* kinds[] = {"sliding", "csa", "hca"};
    const std::string what = std::string(g.name) + " " + kinds[static_cast<int>(kind)] + " start " +
                             std::to_string(start) + " n " + std::to_string(n) + " (" + std::to_string(count) + " entries)";
    if (tile == 0) {
        add(rows, "attention", what + " nmse", nmse(got, want), aff::gpu::attention_max_nmse);
        add(rows, "attention", what + " max rel", max_rel(got, want), 1e-5);
        add(rows, "attention", what + " ring", nmse(got_ring, want_ring), 0.0);
    }
    const std::string split_what = what + " " + std::to_string(splits) + " splits of " + std::to_string(used_tile) +
                                   "-key tiles" + (tile ? " (forced)" : "");
    if (tile) add(rows, "attention", split_what + " tile as forced", used_tile == tile ? 0.0 : 1.0, 0.0);
    add(rows, "attention", split_what + " nmse", nmse(got_split, want), aff::gpu::attention_max_nmse);
    add(rows, "attention", split_what + " max rel", max_rel(got_split, want), 1e-5);
    // Decode at V4-Flash geometry must take the split path (else it went untested).
    if (H == 64 && n <= 4 && start > 1000) add(rows, "attention", what + " used splits", splits > 1 ? 0.0 : 1.0, 0.0);
}

// Block mode: every query of the n sees the ring from max(0, ring_first, start - W) and all n keys.
void run_block_case(std::vector<Row>& rows, aff::ThreadPool& threads, const Geometry& g, std::int64_t start,
                    std::int64_t ring_first, int n) {
    const int H = g.heads, Dh = g.head_dim, W = g.window;
    const aff::gpu::AttentionInputs in = aff::gpu::random_attention_inputs(
        rng(), aff::AttendShape{n, H, Dh, W, start}, Kind::sliding, g.csa_ratio, g.topk, 2.0f);
    std::vector<float> want(static_cast<size_t>(n) * H * Dh);
    aff::attend_block(threads, in.shape, in.q.data(), in.kv.data(), in.ring.data(), ring_first, in.sink.data(),
                      want.data());
    aff::gpu::AttentionDeviceCase dev(in);
    aff::gpu::Buffer dout = poisoned(want.size());
    aff::gpu::AttentionArgs a = dev.args;
    a.out = dout.as<float>();
    a.ring_first = ring_first;
    aff::gpu::Stream s;
    aff::gpu::attention(a, s.handle());
    s.synchronize();
    const std::vector<float> got = to_host<float>(dout, want.size());
    const std::vector<float> ring = to_host<float>(dev.ring, in.ring.size());
    const std::string what = std::string(g.name) + " block start " + std::to_string(start) + " ring_first " +
                             std::to_string(ring_first) + " n " + std::to_string(n);
    add(rows, "attention", what + " nmse vs attend_block", nmse(got, want), aff::gpu::attention_max_nmse);
    add(rows, "attention", what + " max rel", max_rel(got, want), 1e-5);
    add(rows, "attention", what + " ring untouched, floats differing", double(differing(ring, in.ring)), 0.0);
}

// One sequence of a batch: its own state (ring, entries, selection), one token at `start`.
struct BatchSeq {
    aff::gpu::AttentionInputs in;
    aff::gpu::AttentionDeviceCase dev;
    std::vector<float> want, want_ring;
    aff::gpu::Buffer dout, dscratch, dalone;
    explicit BatchSeq(aff::gpu::AttentionInputs inputs) : in(std::move(inputs)), dev(in) {}
};

// 4 sequences in one attention_batch launch (rings stored in it) against each alone through
// attention() (bit for bit) and the CPU (nmse); device_start: positions read from device memory.
void run_batch_case(std::vector<Row>& rows, aff::ThreadPool& threads, const Geometry& g, Kind kind, bool device_start) {
    const int H = g.heads, Dh = g.head_dim, W = g.window;
    const int ratio = kind == Kind::csa ? g.csa_ratio : g.hca_ratio;
    const std::int64_t far = g.heads == 64 ? 70001 : 301;
    const std::vector<float> sink = normal(H);
    std::vector<BatchSeq> seqs;
    seqs.reserve(4);
    const std::int64_t starts[4] = {far, 5, far + 3 * ratio + 1, 0};
    std::vector<aff::gpu::AttentionArgs> args(4);
    std::vector<float*> rings(4);
    std::vector<int32_t> start_host(4);
    for (int i = 0; i < 4; ++i) {
        BatchSeq& b = seqs.emplace_back(aff::gpu::random_attention_inputs(
            rng(), aff::AttendShape{1, H, Dh, W, starts[i]}, kind, ratio, g.topk, 2.0f, sink));
        start_host[i] = static_cast<int32_t>(starts[i]);
        b.want.resize(static_cast<size_t>(H) * Dh);
        aff::attend(threads, b.in.shape, b.in.q.data(), b.in.kv.data(), b.in.ring.data(), b.in.attend_entries(),
                    b.in.sink.data(), b.want.data());
        b.want_ring = b.in.ring;
        aff::ring_store(b.want_ring.data(), b.in.kv.data(), 1, Dh, W, starts[i]);
        b.dout = poisoned(b.want.size());
        b.dalone = poisoned(b.want.size());
        b.dscratch = poisoned(aff::gpu::attention_scratch_bytes(1, H, Dh) / sizeof(float));
        aff::gpu::AttentionArgs& a = args[i];
        a = b.dev.args;
        a.out = b.dout.as<float>();
        a.scratch = b.dscratch.as<float>();
        rings[i] = b.dev.ring.as<float>();
    }
    aff::gpu::Buffer dstarts = to_device(start_host);
    if (device_start)
        for (int i = 0; i < 4; ++i) {
            args[i].start_at = dstarts.as<int32_t>() + i;
            args[i].start = 0;  // ignored: the device holds it
        }
    aff::gpu::Stream s;
    // Alone first (ring untouched: attention() never stores it), then the batch with the stores.
    for (int i = 0; i < 4; ++i) {
        aff::gpu::AttentionArgs a = args[i];
        a.out = seqs[i].dalone.as<float>();
        aff::gpu::attention(a, s.handle());
    }
    aff::gpu::attention_batch(args.data(), 4, rings.data(), s.handle());
    s.synchronize();
    const char* kinds[] = {"sliding", "csa", "hca"};
    const std::string what = std::string(g.name) + " " + kinds[static_cast<int>(kind)] + " batch of 4" +
                             (device_start ? " (start on the device)" : "");
    double worst = 0.0, worst_rel = 0.0, diff = 0.0, ring_err = 0.0;
    for (int i = 0; i < 4; ++i) {
        const std::vector<float> got = to_host<float>(seqs[i].dout, seqs[i].want.size());
        const std::vector<float> alone = to_host<float>(seqs[i].dalone, seqs[i].want.size());
        const std::vector<float> ring = to_host<float>(seqs[i].dev.ring, seqs[i].want_ring.size());
        worst = std::max(worst, nmse(got, seqs[i].want));
        worst_rel = std::max(worst_rel, max_rel(got, seqs[i].want));
        for (size_t j = 0; j < got.size(); ++j)
            if (!(got[j] == alone[j])) diff += 1.0;  // NaN counts too
        ring_err = std::max(ring_err, nmse(ring, seqs[i].want_ring));
    }
    add(rows, "attention", what + " nmse", worst, aff::gpu::attention_max_nmse);
    add(rows, "attention", what + " max rel", worst_rel, 1e-5);
    add(rows, "attention", what + " values differing from alone", diff, 0.0);
    add(rows, "attention", what + " rings", ring_err, 0.0);
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
    for (const Geometry& g : {tiny_c, odd, flash})
        for (Kind kind : {Kind::sliding, Kind::csa, Kind::hca})
            for (bool device_start : {false, true}) run_batch_case(rows, threads, g, kind, device_start);
    struct Block { std::int64_t start, ring_first; };
    for (const Geometry& g : {tiny, tiny_a, tiny_c, odd, flash})
        for (const Block b : {Block{0, 0}, Block{3, 0}, Block{std::int64_t(g.window) + 9, 0}, Block{301, 295},
                              Block{301, 0}, Block{std::int64_t(g.window) - 1, 2}})
            for (int n : {1, 3, 5, 8}) run_block_case(rows, threads, g, b.start, b.ring_first, n);
    // Each tile size at V4-Flash geometry, whichever the default picks. AMD builds have only
    // the 8-key tile (LDS), so 32 is run where attention_tile accepts it.
    for (const int tile : {8, 32}) {
        aff::gpu::AttentionArgs probe;
        probe.heads = flash.heads;
        probe.window = flash.window;
        probe.decode_tile = tile;
        try {
            aff::gpu::attention_tile(probe);
        } catch (const aff::Error&) {
            continue;  // not a tile of this target
        }
        for (Kind kind : {Kind::sliding, Kind::csa, Kind::hca})
            for (const Span sp : {Span{5, 1}, Span{70001, 1}, Span{70001, 4}})
                run_case(rows, threads, flash, kind, sp.start, sp.n, tile);
    }
}
