// Sign-structured codebook training (codebook_train.hpp, formats/quant-codebook.md §3.1,
// §8): a trained table satisfies its structure byte for byte, and one Lloyd step moves
// every base entry to the mean of the un-flipped (un-swapped) scaled targets of all the
// windows that chose one of its entries, recomputed here from the encoder's choices.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/codebook_structure.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/trellis.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

using namespace aff::quant;

namespace {

// Entry w of a table with shift m, from its base entry as the format defines it: swap
// (shift 3, bit 2) first, then bit 0 flips c0's sign bit and bit 1 flips c1's. Shift 0
// is the unstructured table: every entry its own.
std::pair<std::uint16_t, std::uint16_t> structured_entry(std::span<const std::uint16_t> v, int m, unsigned w) {
    const unsigned b = w & ~((1u << m) - 1);
    std::uint16_t c0 = v[2 * b], c1 = v[2 * b + 1];
    if (m == 0) return {c0, c1};
    if (m == 3 && (w & 4)) std::swap(c0, c1);
    if (w & 1) c0 ^= 0x8000;
    if (w & 2) c1 ^= 0x8000;
    return {c0, c1};
}

// Entries (of 4096) that differ from what shift m derives from their base entry.
int violations(const Codebook& cb, int m) {
    const auto v = cb.fp16_values();
    int bad = 0;
    for (unsigned w = 0; w < 4096; ++w) {
        const auto [c0, c1] = structured_entry(v, m, w);
        bad += (v[2 * w] != c0 || v[2 * w + 1] != c1) ? 1 : 0;
    }
    return bad;
}

}  // namespace

TEST_CASE("a sign-structured training gives a table that satisfies the structure byte for byte", "[quant]") {
    aff::ThreadPool pool(2);
    for (const int m : {2, 3}) {
        INFO("shift " << m);
        TrainOptions opt;
        opt.blocks = 32;
        opt.iterations = 2;
        opt.structure = m;
        const Codebook cb = train_codebook(opt, pool);
        CHECK(violations(cb, m) == 0);
        CHECK(find_sign_structure(cb).shift == m);  // what a decoder detects
        // The check can fail: a shift-2 table is not a shift-3 one (a shift-3 table is also
        // a shift-2 one: its sign flips act on entry w & ~3 alike), and the same training
        // without structure fails at nearly every entry that is not a base entry.
        if (m == 2) CHECK(violations(cb, 3) > 1000);
        if (m == 3) CHECK(violations(cb, 2) == 0);
        TrainOptions plain = opt;
        plain.structure = 0;
        CHECK(violations(train_codebook(plain, pool), m) > (4096 - (4096 >> m)) * 9 / 10);
        // Training moved the entries away from the random start.
        opt.iterations = 0;
        const Codebook start = train_codebook(opt, pool);
        CHECK(violations(start, m) == 0);
        CHECK(start.digest() != cb.digest());
        // An unstructured start keeps its base entries and derives the others.
        const Codebook unstructured = train_codebook(plain, pool);
        const Codebook projected = train_codebook(opt, pool, &unstructured);
        CHECK(violations(unstructured, m) > 1000);
        CHECK(violations(projected, m) == 0);
        int same_base = 0;
        for (unsigned b = 0; b < 4096; b += 1u << m)
            same_base += projected.fp16_values()[2 * b] == unstructured.fp16_values()[2 * b] &&
                         projected.fp16_values()[2 * b + 1] == unstructured.fp16_values()[2 * b + 1];
        CHECK(same_base == 4096 >> m);
    }
}

TEST_CASE("the built-in codebook has no sign structure", "[quant]") {
    // It stays the unstructured table until a GPU kernel gains from a structured one
    // (formats/quant-codebook.md §3.1); a switch must re-pin the encoder digests.
    CHECK(find_sign_structure(Codebook::builtin()).shift == 0);
}

TEST_CASE("one structured Lloyd step moves each base entry to the mean of its windows' un-flipped targets", "[quant]") {
    aff::ThreadPool pool(2);
    for (const int m : {0, 2, 3}) {
        INFO("shift " << m);
        TrainOptions opt;
        opt.seed = 5;
        opt.blocks = 64;
        opt.iterations = 0;
        opt.structure = m;
        const Codebook start = train_codebook(opt, pool);
        opt.iterations = 1;
        const Codebook got = train_codebook(opt, pool, &start);

        // The oracle: encode the same training blocks with `start`, fold each window's
        // scaled target back through its transform into its base entry.
        const unsigned mask = (1u << m) - 1;
        std::vector<double> s0(4096, 0), s1(4096, 0), n(4096, 0);
        TrellisScratch scratch;
        std::vector<float> x(kBlockWeights);
        std::uint8_t block[kBlockBytes];
        std::uint16_t windows[kBlockSteps];
        for (std::uint64_t b = 0; b < opt.blocks; ++b) {
            for (int i = 0; i < kBlockWeights; ++i)
                x[i] = static_cast<float>(gaussian_sample(opt.seed, b * kBlockWeights + i));
            encode_block(x.data(), nullptr, start, scratch, block, opt.encode);
            block_windows(block, windows);
            const float scale = block_scale(block);
            for (int t = 0; t < kBlockSteps; ++t) {
                const unsigned w = windows[t];
                const float y0 = x[2 * t] / scale, y1 = x[2 * t + 1] / scale;
                double u0 = (m && (w & 1)) ? -y0 : y0, u1 = (m && (w & 2)) ? -y1 : y1;
                if (m == 3 && (w & 4)) std::swap(u0, u1);
                s0[w & ~mask] += u0;
                s1[w & ~mask] += u1;
                n[w & ~mask] += 1;
            }
        }
        std::vector<std::uint16_t> want(start.fp16_values().begin(), start.fp16_values().end());
        int moved = 0;
        for (unsigned b = 0; b < 4096; b += mask + 1) {
            if (n[b] == 0) continue;
            want[2 * b] = float_to_fp16(static_cast<float>(s0[b] / n[b]));
            want[2 * b + 1] = float_to_fp16(static_cast<float>(s1[b] / n[b]));
            moved += want[2 * b] != start.fp16_values()[2 * b] ? 1 : 0;
        }
        CHECK(moved > (4096 >> m) / 4);  // the step is not a no-op for most chosen bases
        int differ = 0;
        for (unsigned w = 0; w < 4096; ++w) {
            const auto [c0, c1] = structured_entry(want, m, w);
            differ += (got.fp16_values()[2 * w] != c0 || got.fp16_values()[2 * w + 1] != c1) ? 1 : 0;
        }
        CHECK(differ == 0);
    }
}

TEST_CASE("a sign structure other than 0, 2 or 3 is refused", "[quant]") {
    aff::ThreadPool pool(1);
    TrainOptions opt;
    opt.blocks = 1;
    opt.iterations = 0;
    opt.structure = 1;
    CHECK_THROWS_AS(train_codebook(opt, pool), aff::Error);
    opt.structure = 4;
    CHECK_THROWS_WITH(train_codebook(opt, pool), Catch::Contains("sign structure 4"));
}
