// The kernels' TQ2875 window decoder (kernels/tq2875_decode.hpp, shared by moe_gemv and
// moe_gemm and compiled here as plain C++) against the format's reference decoder
// (aff::quant::block_windows, decode_block): both of its views of a block, the step pairs on
// the stored words and the lanes on the byte-swapped words, must give every window, the scale
// and every decoded weight bit for bit, on random blocks and on blocks whose index bits are
// all 0 or all 1 (both ends of the window). Needs no GPU.
#include "kernels/tq2875_decode.hpp"

#include "libaff/quant/codebook.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/trellis.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tq = aff::gpu::dev::tq;

namespace {

std::vector<std::uint8_t> block_of(std::mt19937& rng, int kind) {
    std::vector<std::uint8_t> b(aff::quant::kBlockBytes);
    for (int i = 0; i < aff::quant::kIndexBytes; ++i)
        b[i] = kind == 0 ? 0 : kind == 1 ? 0xff : static_cast<std::uint8_t>(rng());
    const std::uint16_t s = aff::quant::float_to_bf16(std::uniform_real_distribution<float>(-0.3f, 0.3f)(rng));
    b[aff::quant::kIndexBytes] = static_cast<std::uint8_t>(s);
    b[aff::quant::kIndexBytes + 1] = static_cast<std::uint8_t>(s >> 8);
    return b;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

TEST_CASE("tq2875 decoder: step pairs and lanes give the reference windows, scale and weights", "[gpu]") {
    static_assert(tq::kBlockBytes == aff::quant::kBlockBytes);
    const aff::quant::Codebook& cb = aff::quant::Codebook::builtin();
    const std::span<const std::uint16_t> v = cb.fp16_values();
    std::mt19937 rng(20261201);
    int windows_wrong = 0, weights_wrong = 0, scales_wrong = 0;
    for (int t = 0; t < 200; ++t) {
        const std::vector<std::uint8_t> b = block_of(rng, t % 10);
        std::uint16_t want_w[128];
        aff::quant::block_windows(b.data(), want_w);
        float want[256];
        aff::quant::decode_block(b.data(), cb, want);
        std::uint32_t words[tq::kBlockWords], swapped[tq::kBlockWords];
        std::memcpy(words, b.data(), sizeof words);
        for (int i = 0; i < tq::kBlockWords; ++i) swapped[i] = tq::bswap32(words[i]);
        const float s = tq::block_scale(words[tq::kBlockWords - 1]);
        scales_wrong += !same_bits(s, aff::quant::block_scale(b.data()));
        scales_wrong += !same_bits(tq::swapped_scale(swapped[tq::kBlockWords - 1]), s);
        auto weight = [&](std::uint32_t w, int at) {  // weights at, at+1 from window w
            float c0, c1;
            tq::entry_to_float2(std::uint32_t{v[2 * w]} | std::uint32_t{v[2 * w + 1]} << 16, c0, c1);
            weights_wrong += !same_bits(s * c0, want[at]) + !same_bits(s * c1, want[at + 1]);
        };
        for (int p = 0; p < 64; ++p) {  // moe_gemm's and tq2875_dequantize's view
            const tq::PairBits pb = tq::pair_bits(p);
            std::uint32_t w0, w1;
            tq::pair_windows(words[pb.word > 0 ? pb.word - 1 : 0], words[pb.word], pb, w0, w1);
            windows_wrong += (w0 != want_w[2 * p]) + (w1 != want_w[2 * p + 1]);
            weight(w0, 4 * p);
            weight(w1, 4 * p + 2);
        }
        for (int l = 0; l < 32; ++l) {  // moe_gemv's view
            std::uint32_t w[4];
            tq::lane_windows(swapped, tq::lane_bits(l), w[0], w[1], w[2], w[3]);
            for (int i = 0; i < 4; ++i) {
                windows_wrong += w[i] != want_w[4 * l + i];
                weight(w[i], 8 * l + 2 * i);
            }
        }
    }
    CHECK(windows_wrong == 0);
    CHECK(scales_wrong == 0);
    CHECK(weights_wrong == 0);
}

TEST_CASE("tq2875 decoder: fp16 entries convert exactly (every finite pattern)", "[gpu]") {
    int wrong = 0;
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        if ((h & 0x7c00u) == 0x7c00u) continue;  // inf and NaN: the codebook refuses them
        float c0, c1;
        tq::entry_to_float2(h | (0x3c00u << 16), c0, c1);
        wrong += !same_bits(c0, aff::quant::fp16_to_float(static_cast<std::uint16_t>(h))) + !same_bits(c1, 1.0f);
    }
    CHECK(wrong == 0);
}
