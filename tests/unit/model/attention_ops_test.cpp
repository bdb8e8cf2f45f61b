// Tests for libaff/model/attention_ops (the attention steps the GPU kernels are checked
// against) on hand-computed cases: top-k order and ties, the sink in the softmax and the
// window/entry key lists, and a compressor window's gated softmax, norm and state.
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/attention_ops.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

TEST_CASE("select_topk orders by score, ties by lower index, -0 equal to +0", "[model]") {
    const std::vector<float> s = {1.0f, 3.0f, 3.0f, -0.0f, 0.0f, 2.0f, -1.0f};
    std::vector<std::int32_t> out(7, -1);
    REQUIRE(aff::select_topk(s.data(), 7, 5, out.data()) == 5);
    CHECK(out == std::vector<std::int32_t>{1, 2, 5, 0, 3, -1, -1});
    REQUIRE(aff::select_topk(s.data(), 3, 5, out.data()) == 3);  // fewer visible than k
    CHECK(std::vector<std::int32_t>(out.begin(), out.begin() + 3) == std::vector<std::int32_t>{1, 2, 0});
    CHECK(aff::visible_entries(10, 7, 4) == 2);   // positions 0-3 and 4-7 complete
    CHECK(aff::visible_entries(1, 7, 4) == 1);    // only one emitted so far
}

TEST_CASE("attend: the window from kv and ring, the sink in the denominator", "[model]") {
    aff::ThreadPool pool(1);
    // Dh 2, one head, window 2, chunk of one token at position 3: keys ring[2 mod 2] then kv[0].
    const std::vector<float> q = {1.0f, 0.0f}, kv = {0.0f, 2.0f}, ring = {4.0f, 0.0f, 9.0f, 9.0f}, sink = {0.5f};
    const std::vector<float> entries = {2.0f, 2.0f, 1.0f, 1.0f};
    std::vector<float> o(2);
    aff::attend(pool, {1, 1, 2, 2, 3}, q.data(), kv.data(), ring.data(), {}, sink.data(), o.data());
    const float sc = 1.0f / std::sqrt(2.0f);
    // Keys: ring slot 0 (position 2) = (4, 0), score 4/√2; kv[0] = (0, 2), score 0.
    double e1 = std::exp(4 * sc), e2 = 1.0, es = std::exp(0.5);
    CHECK(o[0] == Approx(4 * e1 / (e1 + e2 + es)).epsilon(1e-6));
    CHECK(o[1] == Approx(2 * e2 / (e1 + e2 + es)).epsilon(1e-6));
    // HCA ratio 2 at position 3: both entries visible, after the window keys.
    aff::attend(pool, {1, 1, 2, 2, 3}, q.data(), kv.data(), ring.data(), {entries.data(), 2, 2}, sink.data(), o.data());
    const double e3 = std::exp(2 * sc), e4 = std::exp(1 * sc), den = e1 + e2 + e3 + e4 + es;
    CHECK(o[0] == Approx((4 * e1 + 2 * e3 + e4) / den).epsilon(1e-6));
    // CSA: an explicit selection of entry 1 only.
    const std::int32_t index[] = {1}, count[] = {1};
    aff::AttendEntries sel{entries.data(), 2, 2, index, count, 1};
    aff::attend(pool, {1, 1, 2, 2, 3}, q.data(), kv.data(), ring.data(), sel, sink.data(), o.data());
    CHECK(o[0] == Approx((4 * e1 + e4) / (e1 + e2 + e4 + es)).epsilon(1e-6));
}

TEST_CASE("compress_tokens: gated softmax per channel, norm, pending state", "[model]") {
    // HCA, ratio 2, dim 2, no rotary channels: entry = rms_norm(Σ softmax(gate + ape) · kv).
    const std::vector<float> ape = {0.0f, 0.0f, 1.0f, 0.0f}, norm = {1.0f, 2.0f}, inv_freq;
    const aff::CompressorParams p{2, 2, false, ape.data(), norm.data(), 0.0, &inv_freq};
    aff::CompressorState st;
    st.pending_kv.assign(4, 0.0f);
    st.pending_gate.assign(4, 0.0f);
    const std::vector<float> kv = {1.0f, 3.0f, 2.0f, 5.0f, 7.0f, 7.0f}, gate = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    aff::compress_tokens(p, st, 0, 3, kv.data(), gate.data());
    REQUIRE(st.count == 1);
    REQUIRE(st.pending == 1);
    CHECK(st.pending_kv[0] == 7.0f);
    const double w0 = 1 / (1 + std::exp(1.0)), w1 = 1 - w0;  // channel 0 gates 0 and 0 + ape 1
    const double c0 = w0 * 1 + w1 * 2, c1 = 0.5 * 3 + 0.5 * 5, r = 1 / std::sqrt((c0 * c0 + c1 * c1) / 2);
    CHECK(st.entries[0] == Approx(c0 * r).epsilon(1e-5));
    CHECK(st.entries[1] == Approx(2 * c1 * r).epsilon(1e-5));
}
