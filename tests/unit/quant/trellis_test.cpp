// Tests for the trellis block code (libaff/quant/trellis.cpp), the codebook container
// (codebook.cpp), the half-precision helpers, the rotation and whole-matrix
// quantisation (matrix.cpp), including byte-identical output at any thread count.
#include "aff/core/error.hpp"
#include "aff/core/thread_pool.hpp"
#include "aff/quant/codebook.hpp"
#include "aff/quant/codebook_train.hpp"
#include "aff/quant/half.hpp"
#include "aff/quant/matrix.hpp"
#include "aff/quant/rotation.hpp"
#include "aff/quant/trellis.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

using namespace aff::quant;

namespace {

std::vector<float> gaussian(std::size_t n, std::uint64_t seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(gaussian_sample(seed, i));
    return v;
}

double nmse(const std::vector<float>& x, const std::vector<float>& y) {
    double e = 0, s = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        e += (x[i] - y[i]) * (x[i] - y[i]);
        s += x[i] * x[i];
    }
    return e / s;
}

}  // namespace

TEST_CASE("half conversions round to nearest even and keep special values", "[quant]") {
    CHECK(float_to_fp16(1.0f) == 0x3C00);
    CHECK(float_to_fp16(-2.0f) == 0xC000);
    CHECK(float_to_fp16(65504.0f) == 0x7BFF);
    CHECK(float_to_fp16(70000.0f) == 0x7C00);
    CHECK(float_to_fp16(5.9604644775390625e-8f) == 0x0001);  // smallest subnormal
    CHECK(float_to_fp16(1.0f + 0.00048828125f) == 0x3C00);    // halfway: rounds to even
    CHECK(float_to_fp16(1.0f + 0.00146484375f) == 0x3C02);    // halfway above odd: up
    CHECK(fp16_to_float(0x3555) == Approx(0.333251953125f).epsilon(0));
    CHECK(fp16_to_float(0x0001) == 5.9604644775390625e-8f);
    for (std::uint32_t h = 0; h < 0x7C00; ++h) REQUIRE(float_to_fp16(fp16_to_float(static_cast<std::uint16_t>(h))) == h);
    CHECK(float_to_bf16(1.0f) == 0x3F80);
    CHECK(float_to_bf16(1.00390625f) == 0x3F80);  // halfway, even stays
    CHECK(float_to_bf16(1.01171875f) == 0x3F82);  // halfway, odd rounds up
    CHECK(bf16_to_float(0x4049) == 3.140625f);
    CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST_CASE("step offsets follow the 45-bits-per-16-weights pattern", "[quant]") {
    CHECK(step_end_bit(0) == 6);
    CHECK(step_end_bit(1) == 11);
    CHECK(step_end_bit(7) == 45);
    CHECK(step_end_bit(8) == 51);
    CHECK(step_end_bit(kBlockSteps - 1) == 8 * kIndexBytes);
}

TEST_CASE("decoder reads windows most significant bit first from an all-zero start", "[quant]") {
    const Codebook& cb = Codebook::builtin();
    std::uint8_t block[kBlockBytes] = {};
    block[0] = 0x80;  // first fresh bit of step 0 set: window 0b100000
    block[1] = 0x04;  // bit 13: third of step 2's six fresh bits (11..16)
    const std::uint16_t one = float_to_bf16(2.0f);
    block[kIndexBytes] = static_cast<std::uint8_t>(one);
    block[kIndexBytes + 1] = static_cast<std::uint8_t>(one >> 8);
    std::uint16_t windows[kBlockSteps];
    block_windows(block, windows);
    CHECK(windows[0] == 32);
    CHECK(windows[1] == (32 << 5));            // shifted by step 1's five zero bits
    CHECK(windows[2] == 8);  // 32 shifted out of the 12 bits; fresh bits 11..16 = 0b001000
    CHECK(windows[3] == 8 << 6);
    float out[kBlockWeights];
    decode_block(block, cb, out);
    CHECK(out[0] == 2.0f * cb.coord0()[32]);
    CHECK(out[1] == 2.0f * cb.coord1()[32]);
    CHECK(out[4] == 2.0f * cb.coord0()[windows[2]]);
    CHECK(out[255] == 2.0f * cb.coord1()[0]);
}

TEST_CASE("a Gaussian block round-trips within the quality target", "[quant]") {
    const Codebook& cb = Codebook::builtin();
    TrellisScratch scratch;
    double err = 0, sig = 0;
    for (int b = 0; b < 16; ++b) {
        const auto x = gaussian(kBlockWeights, 100 + b);
        std::uint8_t block[kBlockBytes];
        encode_block(x.data(), nullptr, cb, scratch, block);
        std::vector<float> y(kBlockWeights);
        decode_block(block, cb, y.data());
        for (int i = 0; i < kBlockWeights; ++i) {
            err += (x[i] - y[i]) * (x[i] - y[i]);
            sig += x[i] * x[i];
        }
        // dot_block is the decoder folded into a dot product.
        const auto v = gaussian(kBlockWeights, 900 + b);
        double ref = 0;
        for (int i = 0; i < kBlockWeights; ++i) ref += static_cast<double>(y[i]) * v[i];
        CHECK(dot_block(block, cb, v.data()) == Approx(ref).epsilon(1e-4).margin(1e-4));
    }
    CHECK(err / sig < 0.030);
    CHECK(err / sig > 0.015);  // below the rate-distortion bound would mean a broken metric
}

TEST_CASE("an all-zero block encodes to zeros and decodes to zeros", "[quant]") {
    std::vector<float> x(kBlockWeights, 0.0f), y(kBlockWeights, 1.0f);
    TrellisScratch scratch;
    std::uint8_t block[kBlockBytes];
    std::memset(block, 0xAB, sizeof block);
    encode_block(x.data(), nullptr, Codebook::builtin(), scratch, block);
    for (std::uint8_t byte : block) REQUIRE(byte == 0);
    decode_block(block, Codebook::builtin(), y.data());
    for (float v : y) REQUIRE(v == 0.0f);
}

TEST_CASE("importance moves the error to unimportant positions", "[quant]") {
    const Codebook& cb = Codebook::builtin();
    TrellisScratch scratch;
    double err_hi = 0, err_lo = 0;
    for (int b = 0; b < 8; ++b) {
        const auto x = gaussian(kBlockWeights, 300 + b);
        std::vector<float> q(kBlockWeights), y(kBlockWeights);
        for (int i = 0; i < kBlockWeights; ++i) q[i] = (i % 4 == 0) ? 10.0f : 0.1f;
        std::uint8_t block[kBlockBytes];
        encode_block(x.data(), q.data(), cb, scratch, block);
        decode_block(block, cb, y.data());
        for (int i = 0; i < kBlockWeights; ++i) (i % 4 == 0 ? err_hi : err_lo) += (x[i] - y[i]) * (x[i] - y[i]);
    }
    // Per position, important weights end up with several times less error.
    CHECK(err_hi / (kBlockWeights / 4) * 3 < err_lo / (3 * kBlockWeights / 4));
}

TEST_CASE("encoder rejects non-finite weights naming the position", "[quant]") {
    std::vector<float> x(kBlockWeights, 1.0f);
    x[17] = std::nanf("");
    TrellisScratch scratch;
    std::uint8_t block[kBlockBytes];
    CHECK_THROWS_WITH(encode_block(x.data(), nullptr, Codebook::builtin(), scratch, block),
                      Catch::Contains("weight 17 of a block is not finite"));
}

TEST_CASE("codebook serialises, parses back and rejects damaged bytes", "[quant]") {
    const Codebook& cb = Codebook::builtin();
    auto bytes = cb.serialize();
    REQUIRE(bytes.size() == Codebook::kSerializedBytes);
    CHECK(Codebook::parse(bytes, "").digest() == cb.digest());
    auto bad = bytes;
    bad[1] = 'X';
    CHECK_THROWS_WITH(Codebook::parse(bad, "codebook.bin"), Catch::Contains("bad magic"));
    bad = bytes;
    bad[100] ^= 1;
    CHECK_THROWS_WITH(Codebook::parse(bad, ""), Catch::Contains("digest mismatch"));
    bad = bytes;
    bad.resize(100);
    CHECK_THROWS_WITH(Codebook::parse(bad, ""), Catch::Contains("100 bytes, expected 16416"));
    bad = bytes;
    bad[8] = 2;
    CHECK_THROWS_WITH(Codebook::parse(bad, ""), Catch::Contains("codebook version 2"));
    bad = bytes;
    bad[20] = 1;
    CHECK_THROWS_WITH(Codebook::parse(bad, ""), Catch::Contains("reserved field is not zero"));
    bad = bytes;
    bad[Codebook::kHeaderBytes] = 0x00;
    bad[Codebook::kHeaderBytes + 1] = 0x7C;  // +infinity
    CHECK_THROWS_WITH(Codebook::parse(bad, ""), Catch::Contains("entry 0 is not finite"));
}

TEST_CASE("rotation is orthonormal and undone by unrotate", "[quant]") {
    auto x = gaussian(1024, 7);
    auto y = x;
    rotate(y.data(), y.size());
    double nx = 0, ny = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        nx += x[i] * x[i];
        ny += y[i] * y[i];
    }
    CHECK(ny == Approx(nx).epsilon(1e-5));
    unrotate(y.data(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(y[i] == Approx(x[i]).margin(1e-5));
    CHECK(rotation_supported(4096));
    CHECK_FALSE(rotation_supported(3000));
    int negative = 0;
    for (int i = 0; i < 4096; ++i) negative += rotation_sign(i) < 0;
    CHECK(negative > 1900);
    CHECK(negative < 2200);
}

TEST_CASE("matrix quantisation is byte-identical at any thread count", "[quant]") {
    const std::size_t rows = 24, cols = 512;
    const auto w = gaussian(rows * cols, 21);
    std::vector<float> importance(cols);
    for (std::size_t j = 0; j < cols; ++j) importance[j] = std::exp(static_cast<float>(gaussian_sample(22, j)));
    for (bool rotate : {false, true}) {
        MatrixOptions opt;
        opt.rotation = rotate ? Rotation::on : Rotation::off;
        std::vector<std::uint8_t> one(matrix_bytes(rows, cols)), three(one.size()), two(one.size());
        aff::ThreadPool p1(1), p2(2), p3(3);
        quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), p1, one);
        quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), p2, two);
        quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), p3, three);
        CHECK(one == two);
        CHECK(one == three);
    }
}

TEST_CASE("matvec and dequantize_row agree and approximate the original product", "[quant]") {
    const std::size_t rows = 64, cols = 384;  // a partial last block (128 padded positions)
    const auto w = gaussian(rows * cols, 31);
    const auto x = gaussian(cols, 32);
    for (bool rotate : {false, true}) {
        if (rotate && !rotation_supported(cols)) continue;
        MatrixOptions opt;
        opt.rotation = rotate ? Rotation::on : Rotation::off;
        std::vector<std::uint8_t> q(matrix_bytes(rows, cols));
        aff::ThreadPool pool(2);
        quantize_matrix(w, rows, cols, {}, opt, Codebook::builtin(), pool, q);
        std::vector<float> y(rows);
        matvec(q, rows, cols, rotate, Codebook::builtin(), x.data(), y.data(), &pool);
        std::vector<float> row(cols), deq(rows * cols);
        double product_err = 0, product_sig = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            dequantize_row(std::span(q).subspan(r * row_bytes(cols), row_bytes(cols)), cols, rotate, Codebook::builtin(),
                           &deq[r * cols]);
            double ref = 0, exact = 0;
            for (std::size_t j = 0; j < cols; ++j) {
                ref += static_cast<double>(deq[r * cols + j]) * x[j];
                exact += static_cast<double>(w[r * cols + j]) * x[j];
            }
            CHECK(y[r] == Approx(ref).margin(1e-3));
            product_err += (y[r] - exact) * (y[r] - exact);
            product_sig += exact * exact;
        }
        // The product's relative error is the weights' NMSE (~0.026) for random x.
        CHECK(product_err / product_sig < 0.05);
        CHECK(nmse(w, deq) < 0.03);
    }
    CHECK(row_bytes(384) == 2 * kBlockBytes);
    CHECK(row_bytes(4096) == 1472);  // 2.875 bits a weight
}

TEST_CASE("rotation of a non-power-of-two matrix is refused", "[quant]") {
    const auto w = gaussian(2 * 384, 5);
    std::vector<std::uint8_t> q(matrix_bytes(2, 384));
    aff::ThreadPool pool(1);
    MatrixOptions opt;
    opt.rotation = Rotation::on;
    CHECK_THROWS_WITH(quantize_matrix(w, 2, 384, {}, opt, Codebook::builtin(), pool, q),
                      Catch::Contains("power-of-two column count, not 384"));
}
