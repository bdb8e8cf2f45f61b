// Tests for Sequence::rewind on the CPU reference (libaff/runtime/cpu_sequence.hpp, undo_log
// .hpp), on every fixture under tests/data/models: a sequence run in prefill, decode and
// chunked calls, rewound to p, holds bit for bit the state of a fresh run of the first p
// tokens, and running the rest again gives a fresh run's logits bit for bit. The rewinds
// go to a position inside a CSA window, just after a window closed, into the middle of a
// call, to a call's start and further back than the sliding window. A rewind past the
// depth, below a reset or restore, or on a sequence with depth 0 is refused with a usage
// error and changes nothing.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/runtime/cpu_sequence.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<std::int32_t> tokens_of(int n, int vocab, int salt) {
    std::vector<std::int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(std::int32_t((i * 7919 + 13 + salt * 104729) % vocab));
    return t;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_compressor(const aff::CompressorState& a, const aff::CompressorState& b) {
    return same_floats(a.pending_kv, b.pending_kv) && same_floats(a.pending_gate, b.pending_gate) &&
           a.pending == b.pending && same_floats(a.prev_kv, b.prev_kv) && same_floats(a.prev_gate, b.prev_gate) &&
           a.has_prev == b.has_prev && same_floats(a.entries, b.entries) && a.count == b.count;
}

// Every byte of the main layers' state and the position.
bool same_state(const aff::DecodeState& a, const aff::DecodeState& b) {
    if (a.position != b.position || a.layers.size() != b.layers.size()) return false;
    for (std::size_t l = 0; l < a.layers.size(); ++l)
        if (!same_floats(a.layers[l].ring, b.layers[l].ring) ||
            !same_compressor(a.layers[l].compressor, b.layers[l].compressor) ||
            !same_compressor(a.layers[l].indexer, b.layers[l].indexer))
            return false;
    return true;
}

bool is_usage_error(const std::function<void()>& f, const std::string& contains) {
    try {
        f();
    } catch (const aff::Error& e) {
        return e.kind() == aff::ErrorKind::usage && std::string(e.what()).find(contains) != std::string::npos;
    }
    return false;
}

struct Fixture {
    std::unique_ptr<aff::Model> model;
    int vocab = 0, window = 0, csa = 0, hca = 0;
};

Fixture load(aff::ThreadPool& pool, const char* name) {
    Fixture f;
    f.model = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/" + name, pool);
    const aff::ModelConfig& c = f.model->config();
    f.vocab = c.vocab_size;
    f.window = c.sliding_window;
    for (int l = 0; l < c.num_layers; ++l) {
        if (c.attention[l] == aff::AttentionKind::csa) f.csa = c.compress_ratio[l];
        if (c.attention[l] == aff::AttentionKind::hca) f.hca = c.compress_ratio[l];
    }
    return f;
}

}  // namespace

TEST_CASE("a rewound CPU sequence is a fresh run of its first p tokens, bit for bit", "[runtime]") {
    aff::ThreadPool pool(2);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        INFO(name);
        const Fixture f = load(pool, name);
        REQUIRE(f.csa > 0);
        REQUIRE(f.hca > 0);
        const int W = f.window, R = f.hca;
        // Long enough for several HCA windows and a rewind further back than the window.
        const int N = std::max(4 * R, 3 * W) + 11;
        const std::vector<std::int32_t> all = tokens_of(N, f.vocab, 1);

        aff::CpuSequence fresh(*f.model);
        const std::vector<float> want = fresh.forward(all, true);  // [N, V], one call
        auto fresh_state = [&](int p) {
            aff::CpuSequence s(*f.model);
            if (p > 0) s.forward(std::span(all).first(std::size_t(p)), false);
            return s.state();
        };
        auto rows_from = [&](int p) {
            return std::vector<float>(want.begin() + std::ptrdiff_t(p) * f.vocab, want.end());
        };

        // A prefill, decode steps, calls of 5, decode steps to the end.
        aff::CpuSequence seq(*f.model);
        seq.set_rewind_depth(std::size_t(N));
        const int prefill = W + 3;
        seq.forward(std::span(all).first(std::size_t(prefill)), false);
        int at = prefill;
        for (; at < 2 * W + 5; ++at) seq.forward(std::span(all).subspan(std::size_t(at), 1), false);
        for (; at + 5 <= N - 6; at += 5) seq.forward(std::span(all).subspan(std::size_t(at), 5), false);
        for (; at < N; ++at) seq.forward(std::span(all).subspan(std::size_t(at), 1), false);
        REQUIRE(seq.position() == N);
        CHECK(same_state(seq.state(), fresh_state(N)));
        CHECK(seq.rewind_floor() == 0);

        // Inside a CSA window, just after an HCA (and so a CSA) window closed, the middle of
        // a call of 5, the start of one, further back than the window, into the prefill.
        const int mid_call = 2 * W + 5 + 2;
        const std::vector<int> targets = {N - 1,        N - 2 - (N - 2) % f.csa + 1, (N - 1) / R * R, mid_call,
                                          2 * W + 5,    N - W - 3,                   prefill - 4,     0};
        for (int p : targets) {
            INFO("rewind from " << N << " to " << p);
            REQUIRE(p >= 0);
            REQUIRE(p < N);
            seq.rewind(p);
            CHECK(seq.position() == p);
            CHECK(same_state(seq.state(), fresh_state(p)));
            CHECK(seq.forward(std::span(all).subspan(std::size_t(p)), true) == rows_from(p));
        }

        // A rejected guess: rewind, then other tokens than before, as a fresh run of them.
        const int p = N - 4;
        seq.rewind(p);
        const std::vector<std::int32_t> other = tokens_of(3, f.vocab, 2);
        std::vector<float> got;
        for (std::int32_t t : other) got = seq.forward(std::span(&t, 1), false);
        std::vector<std::int32_t> branch(all.begin(), all.begin() + p);
        branch.insert(branch.end(), other.begin(), other.end());
        aff::CpuSequence fresh_branch(*f.model);
        CHECK(fresh_branch.forward(branch, false) == got);
        CHECK(same_state(seq.state(), fresh_branch.state()));
    }
}

TEST_CASE("rewind is bounded by its depth, resets and restores, and a refusal changes nothing", "[runtime]") {
    aff::ThreadPool pool(2);
    const Fixture f = load(pool, "tiny-b");
    const int N = 60, D = f.window + 5;  // deeper than the sliding window
    const std::vector<std::int32_t> all = tokens_of(N, f.vocab, 3);

    aff::CpuSequence seq(*f.model);
    // Depth 0 (the default): nothing is kept, nothing can be rewound.
    seq.forward(std::span(all).first(10), false);
    CHECK(seq.rewind_depth() == 0);
    CHECK(seq.rewind_floor() == 10);
    CHECK(is_usage_error([&] { seq.rewind(9); }, "can go back to position 10 at most (rewind depth 0 tokens)"));
    seq.rewind(10);  // to where it is: nothing to do
    CHECK(seq.position() == 10);
    CHECK(is_usage_error([&] { seq.rewind(11); }, "the sequence is only at position 10"));

    // Depth D set mid-sequence: the floor starts where the depth was set.
    seq.set_rewind_depth(std::size_t(D));
    CHECK(seq.rewind_floor() == 10);
    seq.forward(std::span(all).subspan(10, 20), false);  // one call to 30
    CHECK(seq.rewind_floor() == 10);
    for (int t = 30; t < N; ++t) seq.forward(std::span(all).subspan(std::size_t(t), 1), false);
    CHECK(seq.rewind_floor() == N - D);
    const aff::DecodeState before = seq.state();
    CHECK(is_usage_error([&] { seq.rewind(N - D - 1); },
                         "rewind to position " + std::to_string(N - D - 1) + " from 60: this sequence can go back to "
                         "position " + std::to_string(N - D) + " at most (rewind depth " + std::to_string(D) + " tokens)"));
    CHECK(same_state(seq.state(), before));
    seq.rewind(N - D);  // the floor itself is allowed
    CHECK(seq.position() == N - D);
    // Lowering the depth drops what it no longer needs.
    seq.forward(std::span(all).subspan(std::size_t(N - D)), false);
    seq.set_rewind_depth(3);
    CHECK(seq.rewind_floor() == N - 3);

    // A restore or reset starts the history over.
    auto snap = seq.snapshot();
    seq.restore(*snap);
    CHECK(seq.rewind_floor() == N);
    CHECK(is_usage_error([&] { seq.rewind(N - 1); }, "can go back to position 60 at most"));
    seq.reset();
    CHECK(seq.rewind_floor() == 0);
    seq.forward(std::span(all).first(5), false);
    seq.rewind(2);
    CHECK(seq.position() == 2);
    seq.set_rewind_depth(0);
    CHECK(seq.rewind_floor() == 2);
}
