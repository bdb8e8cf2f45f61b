// Tests for quantize_matrix's error measurement and MatrixEncoder, the stages
// aff-quantize's pipeline overlaps (libaff/quant/matrix.cpp): the error is that of the
// bytes as decoded, and encoders whose searches run in the background while others are
// prepared and finished write quantize_matrix's bytes.
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/block_search.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/matrix.hpp"
#include "unit/quant/background_search.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace aff::quant;

namespace {

std::vector<float> matrix(std::size_t rows, std::size_t cols, std::uint64_t seed) {
    std::vector<float> w(rows * cols);
    for (std::size_t i = 0; i < w.size(); ++i)
        w[i] = std::ldexp(static_cast<float>(gaussian_sample(seed, i)), static_cast<int>(i / cols % 3) - 1);
    return w;
}

// Σ(w − ŵ)², Σw² with ŵ from dequantize_row (the reference decoder, unrotated), rows in order.
MatrixError decoded_error(const std::vector<float>& w, std::size_t rows, std::size_t cols,
                          const std::vector<std::uint8_t>& bytes, bool rotated) {
    MatrixError e;
    std::vector<float> back(cols);
    for (std::size_t r = 0; r < rows; ++r) {
        MatrixError row;
        dequantize_row(std::span(bytes).subspan(r * row_bytes(cols), row_bytes(cols)), cols, rotated,
                       Codebook::builtin(), back.data());
        for (std::size_t j = 0; j < cols; ++j) {
            const double d = static_cast<double>(w[r * cols + j]) - back[j];
            row.error += d * d;
            row.reference += static_cast<double>(w[r * cols + j]) * w[r * cols + j];
        }
        e.error += row.error, e.reference += row.reference;
    }
    return e;
}

}  // namespace

TEST_CASE("quantize_matrix measures the error of what its bytes decode to", "[quant]") {
    aff::ThreadPool pool(2);
    aff::quant::CpuBlockSearch cpu(pool);
    struct Case {
        std::size_t rows, cols;
        Rotation rotation;
    };
    // 640 columns: the last block half padding, which must not count.
    for (const Case& c : {Case{5, 640, Rotation::off}, Case{6, 512, Rotation::on}, Case{4, 32, Rotation::on}}) {
        for (BlockSearch* search : {static_cast<BlockSearch*>(nullptr), static_cast<BlockSearch*>(&cpu)}) {
            INFO(c.rows << "x" << c.cols << (search ? " batched" : " block by block"));
            const auto w = matrix(c.rows, c.cols, c.cols);
            MatrixOptions opt;
            opt.rotation = c.rotation;
            opt.search = search;
            std::vector<std::uint8_t> bytes(matrix_bytes(c.rows, c.cols)), plain(bytes.size());
            MatrixError e;
            const bool rotated = quantize_matrix(w, c.rows, c.cols, {}, opt, Codebook::builtin(), pool, bytes, &e);
            CHECK(rotated == (c.rotation == Rotation::on));
            quantize_matrix(w, c.rows, c.cols, {}, opt, Codebook::builtin(), pool, plain);
            CHECK(bytes == plain);  // measuring changes nothing
            const MatrixError want = decoded_error(w, c.rows, c.cols, bytes, rotated);
            REQUIRE(want.error > 0);
            if (!rotated) {  // the same sums in the same order
                CHECK(e.error == want.error);
                CHECK(e.reference == want.reference);
            } else {  // the rotated basis: the same up to float rounding
                CHECK(e.error == Approx(want.error).epsilon(1e-5));
                CHECK(e.reference == Approx(want.reference).epsilon(1e-6));
            }
            CHECK(e.error / e.reference > 0.005);
            CHECK(e.error / e.reference < 0.08);
        }
    }
}

TEST_CASE("encoders searching in the background while others are prepared and finished write quantize_matrix's bytes",
          "[quant]") {
    aff::ThreadPool pool(3);
    aff::test::BackgroundSearch search;
    const std::size_t cols = 512;
    std::vector<float> importance(cols);
    for (std::size_t j = 0; j < cols; ++j) importance[j] = std::exp(static_cast<float>(gaussian_sample(7, j)));
    for (int passes : {1, 2}) {
        INFO("passes " << passes);
        MatrixOptions opt;
        opt.rotation = Rotation::automatic;  // with importance: sample searches while another search runs
        opt.encode.passes = passes;
        opt.search = &search;
        constexpr std::size_t kMatrices = 5;
        std::vector<std::vector<float>> w;
        std::vector<std::size_t> rows;
        for (std::size_t m = 0; m < kMatrices; ++m) rows.push_back(3 + m * 5), w.push_back(matrix(rows[m], cols, 40 + m));
        // Odd matrices weighted, even ones not (then always rotated).
        auto imp = [&](std::size_t m) { return m % 2 ? std::span<const float>(importance) : std::span<const float>(); };

        // The pipeline of quantize_model.cpp: wait m-1, start m, finish m-1, prepare m+1.
        MatrixEncoder enc[3];
        std::vector<std::vector<std::uint8_t>> got(kMatrices);
        std::vector<bool> rotated(kMatrices);
        std::vector<MatrixError> error(kMatrices);
        auto finish = [&](std::size_t m) {
            got[m].resize(matrix_bytes(rows[m], cols));
            rotated[m] = enc[m % 3].finish(pool, got[m], &error[m]);
        };
        const int started_before = search.started;
        enc[0].prepare(w[0], rows[0], cols, imp(0), opt, Codebook::builtin(), pool);
        for (std::size_t m = 0; m < kMatrices; ++m) {
            if (m) enc[(m - 1) % 3].wait();
            enc[m % 3].start();
            if (m) finish(m - 1);
            if (m + 1 < kMatrices) enc[(m + 1) % 3].prepare(w[m + 1], rows[m + 1], cols, imp(m + 1), opt, Codebook::builtin(), pool);
        }
        finish(kMatrices - 1);
        CHECK(search.started - started_before == static_cast<int>(kMatrices));

        int weighted_unrotated = 0;
        for (std::size_t m = 0; m < kMatrices; ++m) {
            INFO("matrix " << m);
            std::vector<std::uint8_t> want(matrix_bytes(rows[m], cols));
            MatrixOptions cpu = opt;
            cpu.search = nullptr;
            MatrixError e;
            const bool r = quantize_matrix(w[m], rows[m], cols, imp(m), cpu, Codebook::builtin(), pool, want, &e);
            CHECK(got[m] == want);
            CHECK(rotated[m] == r);
            CHECK(error[m].error == Approx(e.error).epsilon(1e-12));
            CHECK(error[m].reference == Approx(e.reference).epsilon(1e-12));
            weighted_unrotated += m % 2 && !r;
        }
        if (passes == 1) CHECK(weighted_unrotated > 0);  // both branches of the rotation choice ran
    }
}

TEST_CASE("an encoder is refused without a search, and its output must fit", "[quant]") {
    aff::ThreadPool pool(1);
    aff::test::BackgroundSearch search;
    MatrixEncoder enc;
    const auto w = matrix(2, 256, 3);
    MatrixOptions opt;
    CHECK_THROWS_WITH(enc.prepare(w, 2, 256, {}, opt, Codebook::builtin(), pool), Catch::Contains("needs a BlockSearch"));
    opt.search = &search;
    enc.prepare(w, 2, 256, {}, opt, Codebook::builtin(), pool);
    enc.start();
    std::vector<std::uint8_t> small(matrix_bytes(1, 256));
    CHECK_THROWS_WITH(enc.finish(pool, small, nullptr), Catch::Contains("output size"));
    std::vector<std::uint8_t> out(matrix_bytes(2, 256));
    CHECK(enc.finish(pool, out, nullptr));  // automatic without importance: rotated
}
