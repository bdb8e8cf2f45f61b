// Tests for the CPU twins of the prefill GEMMs (libaff/gpu/reference/gemm.hpp): they must be
// the exact twins (fp8_gemv, moe_gemv) with only the inputs rounded to bf16, so the device
// test's bf16 bounds rest on an oracle that is itself checked. Needs no GPU.
#include "libaff/gpu/reference/fp8_gemv.hpp"
#include "libaff/gpu/reference/gemm.hpp"
#include "libaff/gpu/reference/moe_gemv.hpp"

#include "libaff/quant/codebook.hpp"
#include "libaff/quant/half.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

TEST_CASE("fp8 gemm twin: the exact product of bf16-rounded activations", "[gpu]") {
    // 2 rows × 128 columns, all weights 1.0 (0x38), scale 2^1; x = 1 + 2^-8 (a bf16 halfway
    // case: rounds to 1) and 1 + 3·2^-8 (rounds up to 1 + 2^-6).
    const int n = 2, k = 128;
    const std::vector<std::uint8_t> w(n * k, 0x38), scales(1, 128);
    std::vector<float> x(2 * k, 1.0f + std::ldexp(1.0f, -8));
    std::fill(x.begin() + k, x.end(), 1.0f + 3 * std::ldexp(1.0f, -8));
    std::vector<float> y(2 * n), exact(2 * n);
    aff::cpu::fp8_gemm(w.data(), scales.data(), n, k, x.data(), 2, y.data());
    aff::cpu::fp8_gemv(w.data(), scales.data(), n, k, x.data(), 2, exact.data());
    CHECK(y[0] == 2.0f * k);
    CHECK(y[1] == 2.0f * k);
    CHECK(y[2] == 2.0f * k * (1.0f + std::ldexp(1.0f, -6)));
    CHECK(exact[0] == 2.0f * k * (1.0f + std::ldexp(1.0f, -8)));  // the exact twin keeps fp32 x
    // bf16-exact activations: both twins agree bit for bit.
    std::vector<float> xb(k);
    for (int c = 0; c < k; ++c) xb[c] = static_cast<float>(c % 7) - 3.0f;
    aff::cpu::fp8_gemm(w.data(), scales.data(), n, k, xb.data(), 1, y.data());
    aff::cpu::fp8_gemv(w.data(), scales.data(), n, k, xb.data(), 1, exact.data());
    CHECK(y[0] == exact[0]);
    CHECK(y[1] == exact[1]);
}

TEST_CASE("moe gemm twin: decoded weights rounded to bf16", "[gpu]") {
    // One row, one block of all-zero index bits: every weight pair is codebook entry 0 times
    // the scale. Scale 1 + 2^-7 (bf16-exact) makes s·c need more bits than bf16 has.
    const aff::quant::Codebook& cb = aff::quant::Codebook::builtin();
    std::vector<std::uint8_t> w(92, 0);
    const std::uint16_t s = aff::quant::float_to_bf16(1.0f + std::ldexp(1.0f, -7));
    w[90] = static_cast<std::uint8_t>(s);
    w[91] = static_cast<std::uint8_t>(s >> 8);
    const std::vector<float> x(256, 1.0f);
    float y = 0.0f, exact = 0.0f;
    aff::cpu::moe_gemm(w.data(), 1, 256, cb, x.data(), 1, &y);
    aff::cpu::moe_gemv(w.data(), 1, 256, cb, x.data(), 1, &exact);
    const float sc = aff::quant::bf16_to_float(s);
    auto round = [](float v) { return aff::quant::bf16_to_float(aff::quant::float_to_bf16(v)); };
    const double want = 128.0 * (static_cast<double>(round(sc * cb.coord0()[0])) + round(sc * cb.coord1()[0]));
    CHECK(y == static_cast<float>(want));
    CHECK(exact == static_cast<float>(128.0 * (static_cast<double>(sc * cb.coord0()[0]) + sc * cb.coord1()[0])));
}
