// Tests for the CPU twins of the GPU kernels (libaff/gpu/reference): each is checked against
// values worked out by hand from the model doc, so the device tests (tests/gpu) compare the
// GPU against an oracle that is itself checked. Runs in every build; needs no GPU.
#include "libaff/gpu/reference/dense_gemv.hpp"
#include "libaff/gpu/reference/fp8_gemv.hpp"
#include "libaff/gpu/reference/hc.hpp"
#include "libaff/gpu/reference/moe_gemv.hpp"
#include "libaff/gpu/reference/rms_norm.hpp"
#include "libaff/gpu/reference/rope.hpp"

#include "libaff/core/error.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/half.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

using Catch::Matchers::WithinRel;

TEST_CASE("e4m3 and e8m0 decode the codes of the model doc", "[gpu]") {
    CHECK(aff::cpu::e4m3_to_float(0x00) == 0.0f);
    CHECK(aff::cpu::e4m3_to_float(0x01) == std::ldexp(1.0f, -9));    // smallest subnormal
    CHECK(aff::cpu::e4m3_to_float(0x08) == std::ldexp(1.0f, -6));    // smallest normal
    CHECK(aff::cpu::e4m3_to_float(0x38) == 1.0f);
    CHECK(aff::cpu::e4m3_to_float(0x3c) == 1.5f);
    CHECK(aff::cpu::e4m3_to_float(0x7e) == 448.0f);                  // max finite
    CHECK(aff::cpu::e4m3_to_float(0xfe) == -448.0f);
    CHECK(std::isnan(aff::cpu::e4m3_to_float(0x7f)));
    CHECK(std::isnan(aff::cpu::e4m3_to_float(0xff)));
    CHECK(aff::cpu::e8m0_to_float(127) == 1.0f);
    CHECK(aff::cpu::e8m0_to_float(130) == 8.0f);
    CHECK(aff::cpu::e8m0_to_float(0) == std::ldexp(1.0f, -127));
    CHECK(std::isnan(aff::cpu::e8m0_to_float(255)));
}

TEST_CASE("fp8 gemv applies each 128x128 block's own scale", "[gpu]") {
    // 136 rows (two row blocks), 256 columns (two column blocks); weights 1.0 (0x38) except
    // row 130, which holds -2.0 (0xc0). Scales: 2^(1,-1) for row block 0, 2^(2,0) for row block 1.
    const int n = 136, k = 256;
    std::vector<uint8_t> w(static_cast<size_t>(n) * k, 0x38);
    for (int c = 0; c < k; ++c) w[130 * k + c] = 0xc0;
    const std::vector<uint8_t> scales = {128, 126, 129, 127};
    std::vector<float> x(2 * k);
    for (int c = 0; c < 2 * k; ++c) x[c] = static_cast<float>((c % 7) - 3) * 0.25f + (c >= k ? 1.0f : 0.0f);
    std::vector<float> y(2 * n, -1.0f);
    aff::cpu::fp8_gemv(w.data(), scales.data(), n, k, x.data(), 2, y.data());
    for (int b = 0; b < 2; ++b) {
        const double lo = std::accumulate(x.begin() + b * k, x.begin() + b * k + 128, 0.0);
        const double hi = std::accumulate(x.begin() + b * k + 128, x.begin() + (b + 1) * k, 0.0);
        CHECK_THAT(y[b * n + 5], WithinRel(2.0 * lo + 0.5 * hi, 1e-6));
        CHECK_THAT(y[b * n + 129], WithinRel(4.0 * lo + 1.0 * hi, 1e-6));
        CHECK_THAT(y[b * n + 130], WithinRel(-2.0 * (4.0 * lo + 1.0 * hi), 1e-6));
    }
}

TEST_CASE("rms norm divides by the root mean square, with and without weight", "[gpu]") {
    const std::vector<float> x = {3.0f, -4.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    const std::vector<float> w = {1.0f, 2.0f, 3.0f, 4.0f};
    std::vector<float> y(8);
    aff::cpu::rms_norm(x.data(), w.data(), y.data(), 2, 4, 0.0f);
    // Row 0: rms = sqrt(25 / 4) = 2.5.
    CHECK_THAT(y[0], WithinRel(1.2f, 1e-6f));
    CHECK_THAT(y[1], WithinRel(-3.2f, 1e-6f));
    CHECK(y[2] == 0.0f);
    CHECK_THAT(y[7], WithinRel(4.0f, 1e-6f));
    aff::cpu::rms_norm(x.data(), nullptr, y.data(), 2, 4, 0.0f);
    CHECK_THAT(y[1], WithinRel(-1.6f, 1e-6f));
    CHECK_THAT(y[5], WithinRel(1.0f, 1e-6f));
}

TEST_CASE("rope tables: plain frequencies and YaRN's ramp between pairs 15 and 25", "[gpu]") {
    const aff::RopeTable main = aff::rope_table({10000.0, 64, 1.0});
    REQUIRE(main.pairs == 32);
    for (int j = 0; j < 32; ++j) CHECK_THAT(main.theta[j], WithinRel(std::pow(10000.0, -j / 32.0), 1e-6));

    const aff::RopeTable yarn = aff::rope_table({160000.0, 64, 16.0, 65536.0, 32.0, 1.0});
    auto f = [](int j) { return std::pow(160000.0, -j / 32.0); };
    for (int j = 0; j <= 15; ++j) CHECK_THAT(yarn.theta[j], WithinRel(f(j), 1e-6));
    for (int j = 25; j < 32; ++j) CHECK_THAT(yarn.theta[j], WithinRel(f(j) / 16.0, 1e-6));
    CHECK_THAT(yarn.theta[20], WithinRel(0.5 * f(20) / 16.0 + 0.5 * f(20), 1e-6));
    CHECK_THAT(yarn.theta[16], WithinRel(0.1 * f(16) / 16.0 + 0.9 * f(16), 1e-6));

    CHECK_THROWS_AS(aff::rope_table({10000.0, 63, 1.0}), aff::Error);
}

TEST_CASE("rope rotates trailing interleaved pairs and the inverse undoes it", "[gpu]") {
    const aff::RopeTable t = aff::rope_table({10000.0, 4, 1.0});  // θ = 1, 0.01
    const int dim = 8;
    std::vector<float> x = {5, 6, 7, 8, 1, 0, 0, 1};
    const std::vector<float> orig = x;
    const int32_t pos = 3;
    aff::cpu::rope(x.data(), &pos, 1, 1, dim, t, false);
    for (int i = 0; i < 4; ++i) CHECK(x[i] == orig[i]);  // the non-rotary part is untouched
    CHECK_THAT(x[4], WithinRel(static_cast<float>(std::cos(3.0)), 1e-6f));
    CHECK_THAT(x[5], WithinRel(static_cast<float>(std::sin(3.0)), 1e-6f));
    CHECK_THAT(x[6], WithinRel(static_cast<float>(-std::sin(0.03)), 1e-5f));
    CHECK_THAT(x[7], WithinRel(static_cast<float>(std::cos(0.03)), 1e-6f));
    aff::cpu::rope(x.data(), &pos, 1, 1, dim, t, true);
    for (int i = 4; i < 8; ++i) CHECK(std::fabs(x[i] - orig[i]) < 1e-6f);
}

TEST_CASE("mHC pre: Sinkhorn makes comb doubly stochastic, pre and post follow the doc", "[gpu]") {
    const int dim = 16, width = 4 * dim, rows = aff::gpu::kHcMixRows;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(width), fn(static_cast<size_t>(rows) * width), base(rows);
    for (float& v : x) v = nd(rng);
    for (float& v : fn) v = nd(rng) * 0.05f;  // moderate logits: Sinkhorn converges in 20 steps
    for (float& v : base) v = nd(rng);
    const float scale[3] = {0.5f, 0.7f, 1.3f};
    aff::gpu::HcConfig c;
    c.dim = dim;
    std::vector<float> post(4), comb(16), u(dim);
    aff::cpu::hc_pre(x.data(), 1, {fn.data(), base.data(), scale}, c, post.data(), comb.data(), u.data());
    for (int b = 0; b < 4; ++b) {
        double col = 0.0, row = 0.0;
        for (int a = 0; a < 4; ++a) col += comb[a * 4 + b], row += comb[b * 4 + a];
        CHECK(std::fabs(col - 1.0) < 1e-5);
        CHECK(std::fabs(row - 1.0) < 1e-3);
    }
    for (float p : post) CHECK((p > 0.0f && p < 2.0f));

    // With fn = 0 every z is 0: pre = sigmoid(base) + eps, post = 2 sigmoid(base), and comb
    // comes from base alone.
    std::fill(fn.begin(), fn.end(), 0.0f);
    aff::cpu::hc_pre(x.data(), 1, {fn.data(), base.data(), scale}, c, post.data(), comb.data(), u.data());
    auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
    for (int k = 0; k < 4; ++k) CHECK_THAT(post[k], WithinRel(2.0 * sig(base[4 + k]), 1e-6));
    // One Sinkhorn iteration is row softmax + eps, then one column normalisation.
    c.sinkhorn_iters = 1;
    aff::cpu::hc_pre(x.data(), 1, {fn.data(), base.data(), scale}, c, post.data(), comb.data(), u.data());
    double m[4][4];
    for (int a = 0; a < 4; ++a) {
        double sum = 0.0;
        for (int b = 0; b < 4; ++b) sum += std::exp(base[8 + a * 4 + b]);
        for (int b = 0; b < 4; ++b) m[a][b] = std::exp(base[8 + a * 4 + b]) / sum + 1e-6;
    }
    for (int b = 0; b < 4; ++b) {
        const double col = m[0][b] + m[1][b] + m[2][b] + m[3][b] + 1e-6;
        for (int a = 0; a < 4; ++a) CHECK_THAT(comb[a * 4 + b], WithinRel(m[a][b] / col, 1e-6));
    }
    for (int d = 0; d < dim; d += 5) {
        double want = 0.0;
        for (int k = 0; k < 4; ++k) want += (sig(base[k]) + 1e-6) * x[k * dim + d];
        CHECK_THAT(u[d], WithinRel(want, 1e-5));
    }
}

TEST_CASE("mHC expand feeds stream b from column b of comb (not row b)", "[gpu]") {
    const int dim = 3;
    std::vector<float> x = {1, 2, 3, 10, 20, 30, 100, 200, 300, 1000, 2000, 3000};
    const std::vector<float> f = {0.5f, 0.25f, 0.125f};
    const std::vector<float> post = {0.0f, 2.0f, 0.0f, 0.0f};
    std::vector<float> comb(16, 0.0f);
    comb[0 * 4 + 1] = 1.0f;  // stream 0 → new stream 1
    comb[3 * 4 + 0] = 0.5f;  // stream 3 → new stream 0
    aff::cpu::hc_post(x.data(), f.data(), post.data(), comb.data(), 1, dim);
    CHECK(x[0] == 500.0f);         // 0.5 · stream 3
    CHECK(x[3] == 1.0f + 1.0f);    // stream 0 + 2 · f
    CHECK(x[4] == 2.0f + 0.5f);
    CHECK(x[6] == 0.0f);           // column 2 is empty
    CHECK(x[9] == 0.0f);
}

TEST_CASE("hyper head mixes the streams by sigmoid(scale z + base) + eps", "[gpu]") {
    const int dim = 2;
    const std::vector<float> x = {1, 1, 2, 2, 3, 3, 4, 4};
    const std::vector<float> fn(4 * 4 * dim, 0.0f), base = {0.0f, 1.0f, -1.0f, 2.0f};
    const float scale[1] = {1.0f};
    aff::gpu::HcConfig c;
    c.dim = dim;
    std::vector<float> y(dim);
    aff::cpu::hc_head(x.data(), 1, {fn.data(), base.data(), scale}, c, y.data());
    double want = 0.0;
    for (int k = 0; k < 4; ++k) want += (1.0 / (1.0 + std::exp(-base[k])) + 1e-6) * (k + 1);
    CHECK_THAT(y[0], WithinRel(want, 1e-6));
    CHECK_THAT(y[1], WithinRel(want, 1e-6));
}

TEST_CASE("moe gemv twin: windows of all-zero and all-one bits, block scales, zero scale", "[gpu]") {
    // Row 0: block 0 all-zero bits (every window 0), scale 0.5; block 1 all-one bits
    // (windows 63, 2047, then 4095 for the other 126 steps: format §4), scale -2.
    // Row 1: block 0 all-one bits with scale 0 (decodes to zeros), block 1 all-zero, scale 1.
    const aff::quant::Codebook& cb = aff::quant::Codebook::builtin();
    std::vector<std::uint8_t> w(4 * 92, 0);
    auto set_block = [&](int b, std::uint8_t bits, float scale) {
        std::fill(w.begin() + b * 92, w.begin() + b * 92 + 90, bits);
        const std::uint16_t s = aff::quant::float_to_bf16(scale);
        w[b * 92 + 90] = static_cast<std::uint8_t>(s);
        w[b * 92 + 91] = static_cast<std::uint8_t>(s >> 8);
    };
    set_block(0, 0x00, 0.5f);
    set_block(1, 0xff, -2.0f);
    set_block(2, 0xff, 0.0f);
    set_block(3, 0x00, 1.0f);
    std::vector<float> x(2 * 512, 1.0f);
    std::fill(x.begin() + 512, x.end(), 3.0f);  // batch 2: three times batch 1
    std::vector<float> y(2 * 2);
    aff::cpu::moe_gemv(w.data(), 2, 512, cb, x.data(), 2, y.data());
    const float* c0 = cb.coord0();
    const float* c1 = cb.coord1();
    const double zeros = 128.0 * (static_cast<double>(c0[0]) + c1[0]);
    const double ones = static_cast<double>(c0[63]) + c1[63] + c0[2047] + c1[2047] + 126.0 * (static_cast<double>(c0[4095]) + c1[4095]);
    CHECK_THAT(y[0], WithinRel(static_cast<float>(0.5 * zeros - 2.0 * ones), 1e-5f));
    CHECK_THAT(y[1], WithinRel(static_cast<float>(zeros), 1e-5f));
    CHECK_THAT(y[2], WithinRel(static_cast<float>(3.0 * (0.5 * zeros - 2.0 * ones)), 1e-5f));
    CHECK_THAT(y[3], WithinRel(static_cast<float>(3.0 * zeros), 1e-5f));
}

TEST_CASE("bf16 rounding is to nearest even and decoding is exact", "[gpu]") {
    CHECK(aff::cpu::float_to_bf16(1.0f) == 0x3f80);
    CHECK(aff::cpu::bf16_to_float(0x3f80) == 1.0f);
    CHECK(aff::cpu::float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);   // halfway: to even (down)
    CHECK(aff::cpu::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // halfway: to even (up)
    CHECK(aff::cpu::float_to_bf16(-2.5f) == 0xc020);
}

TEST_CASE("dense GEMV twins: plain, indexed, embedding, SwiGLU clamp and MoE combine", "[gpu]") {
    // W = [[1, 2, 3], [-1, 0, 0.5]] as bf16 and f32; x rows (1, 1, 1) and (2, 0, -2).
    const float wf[6] = {1, 2, 3, -1, 0, 0.5f};
    uint16_t wb[6];
    for (int i = 0; i < 6; ++i) wb[i] = aff::cpu::float_to_bf16(wf[i]);
    const float x[6] = {1, 1, 1, 2, 0, -2};
    for (const auto* w : {static_cast<const void*>(wf), static_cast<const void*>(wb)}) {
        const auto type = w == wf ? aff::gpu::DenseType::f32 : aff::gpu::DenseType::bf16;
        float y[4] = {};
        aff::cpu::dense_gemv(w, type, 2, 3, x, 3, 2, y, 2);
        CHECK(y[0] == 6.0f);
        CHECK(y[1] == -0.5f);
        CHECK(y[2] == -4.0f);
        CHECK(y[3] == -3.0f);
    }
    // Two stacked 1 x 3 matrices; jobs pick 1, 0, 1; x_group 3 (one x row for all three jobs).
    const float stack[6] = {1, 0, 0, 0, 0, 2};
    const int32_t ids[3] = {1, 0, 1};
    float yi[3] = {};
    aff::cpu::dense_gemv_indexed(stack, aff::gpu::DenseType::f32, 1, 3, ids, 3, x + 3, 3, yi);
    CHECK(yi[0] == -4.0f);
    CHECK(yi[1] == 2.0f);
    CHECK(yi[2] == -4.0f);
    // Embedding rows 1 then 0 into 2 streams.
    const int32_t tokens[2] = {1, 0};
    float e[12] = {};
    aff::cpu::embed(wf, aff::gpu::DenseType::f32, 3, tokens, 2, 2, e);
    CHECK(std::vector<float>(e, e + 12) == std::vector<float>{-1, 0, 0.5f, -1, 0, 0.5f, 1, 2, 3, 1, 2, 3});
    // SwiGLU with limit 1: the gate is capped above only, the up value on both sides.
    const float g[3] = {3.0f, -2.0f, 0.5f}, u[3] = {5.0f, -4.0f, 0.25f};
    float out[3];
    aff::cpu::swiglu(g, u, 3, 1.0f, out);
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    CHECK_THAT(out[0], WithinRel(static_cast<float>(silu(1.0) * 1.0), 1e-6f));
    CHECK_THAT(out[1], WithinRel(static_cast<float>(silu(-2.0) * -1.0), 1e-6f));
    CHECK_THAT(out[2], WithinRel(static_cast<float>(silu(0.5) * 0.25), 1e-6f));
    // Combine: 1 token, 2 experts, dim 2, plus shared.
    const float routed[4] = {1, 2, 10, 20}, weights[2] = {0.5f, 0.25f}, shared[2] = {100, 200};
    float c[2];
    aff::cpu::moe_combine(routed, weights, 1, 2, 2, shared, c);
    CHECK(c[0] == 103.0f);
    CHECK(c[1] == 206.0f);
    aff::cpu::moe_combine(routed, weights, 1, 2, 2, nullptr, c);
    CHECK(c[0] == 3.0f);
}

TEST_CASE("mHC pre with 3 streams: comb is doubly stochastic, post in (0, 2)", "[gpu]") {
    const int n = 3, dim = 8, width = n * dim, rows = aff::gpu::hc_mix_rows(n);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(width), fn(static_cast<size_t>(rows) * width), base(rows);
    for (float& v : x) v = nd(rng);
    for (float& v : fn) v = nd(rng) * 0.05f;
    for (float& v : base) v = nd(rng);
    const float scale[3] = {0.5f, 0.7f, 1.3f};
    aff::gpu::HcConfig c;
    c.dim = dim;
    c.streams = n;
    std::vector<float> post(n), comb(n * n), u(dim);
    aff::cpu::hc_pre(x.data(), 1, {fn.data(), base.data(), scale}, c, post.data(), comb.data(), u.data());
    for (int b = 0; b < n; ++b) {
        double col = 0.0, row = 0.0;
        for (int a = 0; a < n; ++a) col += comb[a * n + b], row += comb[b * n + a];
        CHECK(std::fabs(col - 1.0) < 1e-5);
        CHECK(std::fabs(row - 1.0) < 1e-3);
    }
    for (float p : post) CHECK((p > 0.0f && p < 2.0f));
    // Expand with comb = identity-like from the twin: stream b gets post_b f + Σ_a comb[a][b] x[a].
    std::vector<float> xe = x, f(dim, 1.0f);
    aff::cpu::hc_post(xe.data(), f.data(), post.data(), comb.data(), 1, dim, n);
    for (int b = 0; b < n; ++b) {
        double want = post[b];
        for (int a = 0; a < n; ++a) want += static_cast<double>(comb[a * n + b]) * x[a * dim + 0];
        CHECK_THAT(xe[b * dim + 0], WithinRel(static_cast<float>(want), 1e-5f));
    }
}
