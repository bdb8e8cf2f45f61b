// Tests for the batched encoding (matrix.cpp with MatrixOptions::search, trellis.hpp's
// encode_begin … encode_finish) and the choice of the search's device (libaff/gpu/block_search_choice.hpp):
// batched bytes equal block-by-block bytes, errors read the same, and --gpus is refused
// the way aff-run refuses it.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/runtime/open_sequence.hpp"
#include "libaff/gpu/block_search_choice.hpp"
#include "libaff/quant/block_search.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/matrix.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace aff::quant;

namespace {

// Rows of different magnitudes; a few blocks all zero, so some blocks stop early.
std::vector<float> matrix(std::size_t rows, std::size_t cols, std::uint64_t seed) {
    std::vector<float> w(rows * cols);
    for (std::size_t i = 0; i < w.size(); ++i)
        w[i] = std::ldexp(static_cast<float>(gaussian_sample(seed, i)), static_cast<int>(i / cols % 4) - 2);
    for (std::size_t j = 0; j < 256; ++j) w[3 * cols + j] = 0.0f;
    return w;
}

struct Encoded {
    std::vector<std::uint8_t> bytes;
    bool rotated = false;
};

Encoded encode(const std::vector<float>& w, std::size_t rows, std::size_t cols, const std::vector<float>& importance,
               MatrixOptions opt, aff::ThreadPool& pool, BlockSearch* search) {
    opt.search = search;
    Encoded e;
    e.bytes.resize(matrix_bytes(rows, cols));
    e.rotated = quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), pool, e.bytes);
    return e;
}

}  // namespace

TEST_CASE("batched searches give the block-by-block bytes, passes stopping at different blocks", "[quant]") {
    aff::ThreadPool pool(2);
    CpuBlockSearch search(pool);
    const std::size_t rows = 12, cols = 640;  // 3 blocks a row, the last half padding
    const auto w = matrix(rows, cols, 11);
    std::vector<float> q(cols);
    for (std::size_t j = 0; j < cols; ++j) q[j] = j % 5 ? std::exp(static_cast<float>(gaussian_sample(12, j))) : 0.0f;
    for (int passes : {1, 3}) {
        for (Rotation rotation : {Rotation::off, Rotation::automatic}) {
            MatrixOptions opt;
            opt.rotation = rotation;
            opt.encode.passes = passes;
            const Encoded a = encode(w, rows, cols, q, opt, pool, nullptr);
            const Encoded b = encode(w, rows, cols, q, opt, pool, &search);
            CHECK(a.bytes == b.bytes);
            CHECK(a.rotated == b.rotated);
        }
    }
    CHECK(search.describe() == "CPU (2 threads)");
}

TEST_CASE("batched encoding reports a bad weight as the block-by-block one does", "[quant]") {
    aff::ThreadPool pool(2);
    CpuBlockSearch search(pool);
    const std::size_t rows = 4, cols = 512;
    auto w = matrix(rows, cols, 13);
    w[2 * cols + 300] = std::numeric_limits<float>::infinity();
    MatrixOptions opt;
    opt.rotation = Rotation::off;
    for (BlockSearch* s : {static_cast<BlockSearch*>(nullptr), static_cast<BlockSearch*>(&search)}) {
        try {
            encode(w, rows, cols, {}, opt, pool, s);
            FAIL("no error");
        } catch (const aff::Error& e) {
            CHECK(e.kind() == aff::ErrorKind::format);
            // Found before any block search, where row and column are known.
            CHECK(std::string(e.what()).find("weight at row 2, column 300 is infinite") != std::string::npos);
        }
    }
}

TEST_CASE("--gpus for the quantiser: 0 is the CPU, and a build without GPU support refuses N > 0", "[quant]") {
    CHECK(aff::gpu::open_block_search(0) == nullptr);
    if (!aff::gpu_support_built()) {
        CHECK(aff::gpu::open_block_search(-1) == nullptr);
        try {
            aff::gpu::open_block_search(1);
            FAIL("no error");
        } catch (const aff::Error& e) {
            CHECK(e.kind() == aff::ErrorKind::usage);
            CHECK(e.message() == "--gpus 1: this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
        }
    }
}
