// Pins the encoder's output bytes: XXH3-64 digests of whole quantised matrices, taken
// from the reference encoder before any speed work on the Viterbi search. Any change to
// the search that alters a single chosen window (a different float operation order, a
// tie broken the other way) changes a digest here, so optimisations are proven
// bit-exact on every path: rotated, importance-weighted, padded, two-pass, automatic.
// Each case runs twice: block by block (encode_block) and batched through a BlockSearch
// (CpuBlockSearch here; the GPU search runs the same cases in tests/gpu).
#include "libaff/core/hash.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/block_search.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/matrix.hpp"
#include "unit/quant/test_rows.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace aff::quant;
using namespace aff::test;

namespace {

// The digest of the block-by-block encoding; 0 when the batched encoding differs from it.
std::uint64_t digest(std::size_t rows, std::size_t cols, const std::vector<float>& w,
                     const std::vector<float>& importance, MatrixOptions opt, bool* rotated = nullptr) {
    aff::ThreadPool pool(2);
    std::vector<std::uint8_t> out(matrix_bytes(rows, cols)), batched(out.size());
    const bool r = quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), pool, out);
    CpuBlockSearch search(pool);
    opt.search = &search;
    const bool rb = quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), pool, batched);
    if (rotated) *rotated = r;
    return out == batched && r == rb ? aff::xxh3_64(out) : 0;
}

}  // namespace

TEST_CASE("quantised bytes match the digests of the reference encoder", "[quant]") {
    REQUIRE(Codebook::builtin().digest() == 0xdac98311d84fa88cull);
    const std::size_t rows = 24, cols = 1024;
    const auto w = rows_of_varying_scale(rows, cols, 501);
    const auto q = importance_of(cols, 502);
    MatrixOptions opt;

    opt.rotation = Rotation::on;  // the default path without an imatrix: flat weights
    CHECK(digest(rows, cols, w, {}, opt) == 0x7662b8977f55148aull);

    opt.rotation = Rotation::off;  // per-position importance in the search
    CHECK(digest(rows, cols, w, q, opt) == 0x377b3fcd6e85a633ull);

    opt.rotation = Rotation::automatic;  // samples rows both ways, then encodes
    bool rotated = true;
    CHECK(digest(rows, cols, w, q, opt, &rotated) == 0x377b3fcd6e85a633ull);
    CHECK_FALSE(rotated);

    opt.rotation = Rotation::on;
    opt.encode.passes = 2;  // least-squares scale refit and a second search
    CHECK(digest(rows, cols, w, {}, opt) == 0x382b7a27039151deull);

    MatrixOptions unrotated;
    unrotated.rotation = Rotation::off;
    CHECK(digest(rows, cols, fp4_like(rows, cols, 504), {}, unrotated) == 0x593a9d9a29bc5972ull);

    // 384 columns: the last block of each row is half padding (importance 0).
    const auto p = rows_of_varying_scale(rows, 384, 503);
    CHECK(digest(rows, 384, p, {}, unrotated) == 0x2725cd9f0959dac7ull);
}
