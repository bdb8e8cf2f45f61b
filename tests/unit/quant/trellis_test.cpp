// Tests for the trellis block code (libaff/quant/trellis.cpp), the codebook container
// (codebook.cpp), the half-precision helpers, the rotation and whole-matrix
// quantisation (matrix.cpp), including byte-identical output at any thread count.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/rotation.hpp"
#include "libaff/quant/trellis.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
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

namespace {

// The reference decoder's definition, independent of trellis.cpp: the 12-bit shift register
// w = ((w << k) | the step's k fresh bits) mod 2^12 from w = 0, and the dot product as one
// sum over the steps in order, times the block's scale.
void shift_register_windows(const std::uint8_t* block, std::uint16_t* windows) {
    unsigned w = 0;
    int pos = 0;
    for (int t = 0; t < kBlockSteps; ++t) {
        const int k = kStepBits[t % 8];
        for (int i = 0; i < k; ++i, ++pos) w = ((w << 1) | ((block[pos / 8] >> (7 - pos % 8)) & 1u)) & 0xfffu;
        windows[t] = static_cast<std::uint16_t>(w);
    }
}

float reference_dot(const std::uint8_t* block, const Codebook& cb, const float* x) {
    std::uint16_t windows[kBlockSteps];
    shift_register_windows(block, windows);
    float acc = 0.0f;
    for (int t = 0; t < kBlockSteps; ++t)
        acc += cb.coord0()[windows[t]] * x[2 * t] + cb.coord1()[windows[t]] * x[2 * t + 1];
    return block_scale(block) * acc;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Random index bits and a random bf16 scale.
std::vector<std::uint8_t> random_blocks(std::size_t count, std::uint64_t seed) {
    std::vector<std::uint8_t> b(count * kBlockBytes);
    for (std::size_t i = 0; i < b.size(); ++i)
        b[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(std::fabs(gaussian_sample(seed, i)) * 1e6) & 0xffu);
    for (std::size_t k = 0; k < count; ++k) {
        const std::uint16_t s = float_to_bf16(static_cast<float>(gaussian_sample(seed + 1, k)));
        b[k * kBlockBytes + kIndexBytes] = static_cast<std::uint8_t>(s);
        b[k * kBlockBytes + kIndexBytes + 1] = static_cast<std::uint8_t>(s >> 8);
    }
    return b;
}

}  // namespace

TEST_CASE("the fast decoders give the shift register's windows and its sums bit for bit", "[quant]") {
    const Codebook& cb = Codebook::builtin();
    const auto blocks = random_blocks(32, 77);
    for (std::size_t k = 0; k < 32; ++k) {
        const std::uint8_t* block = &blocks[k * kBlockBytes];
        std::uint16_t want[kBlockSteps], got[kBlockSteps];
        shift_register_windows(block, want);
        block_windows(block, got);
        CHECK(std::memcmp(want, got, sizeof want) == 0);
        float out[kBlockWeights];
        decode_block(block, cb, out);
        const float s = block_scale(block);
        CHECK(same_bits(out[6], s * cb.coord0()[want[3]]));
        CHECK(same_bits(out[255], s * cb.coord1()[want[kBlockSteps - 1]]));
        // Whole blocks, and a row's last block with x zero past `weights` (padding skipped).
        for (const int weights : {256, 255, 200, 64, 33, 32, 2, 1, 0}) {
            INFO("block " << k << ", weights " << weights);
            std::vector<float> x = gaussian(kBlockWeights, 300 + k);
            for (int i = weights; i < kBlockWeights; ++i) x[i] = 0.0f;
            const float ref = reference_dot(block, cb, x.data());
            CHECK(same_bits(dot_block(block, cb, x.data(), weights), ref));
            CHECK(same_bits(dot_block(block, cb, x.data()), ref));
            const std::uint8_t* four[4] = {block, &blocks[((k + 1) % 32) * kBlockBytes],
                                           &blocks[((k + 2) % 32) * kBlockBytes], block};
            float dots[4];
            dot_block4(four, cb, x.data(), weights, dots);
            for (int i = 0; i < 4; ++i) CHECK(same_bits(dots[i], reference_dot(four[i], cb, x.data())));
        }
    }
}

TEST_CASE("matvec sums each row's blocks as the reference decoder does, bit for bit", "[quant]") {
    const Codebook& cb = Codebook::builtin();
    aff::ThreadPool pool(2);
    for (const std::size_t cols : {64, 320, 512}) {
        const std::size_t rows = 11;  // two groups of four rows and three alone
        const auto w = gaussian(rows * cols, 41);
        std::vector<std::uint8_t> q(matrix_bytes(rows, cols));
        MatrixOptions opt;
        opt.rotation = Rotation::off;
        quantize_matrix(w, rows, cols, {}, opt, cb, pool, q);
        const auto x = gaussian(cols, 42);
        std::vector<float> xp(matvec_scratch_floats(cols), 0.0f);
        std::copy(x.begin(), x.end(), xp.begin());
        std::vector<float> y(rows), yp(rows);
        matvec(q, rows, cols, false, cb, x.data(), y.data());
        matvec(q, rows, cols, false, cb, x.data(), yp.data(), &pool);
        for (std::size_t r = 0; r < rows; ++r) {
            INFO("cols " << cols << ", row " << r);
            float acc = 0.0f;
            for (std::size_t b = 0; b * kBlockWeights < cols; ++b)
                acc += reference_dot(&q[r * row_bytes(cols) + b * kBlockBytes], cb, &xp[b * kBlockWeights]);
            CHECK(same_bits(y[r], acc));
            CHECK(same_bits(yp[r], acc));
        }
    }
}
