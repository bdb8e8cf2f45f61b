// Tests for the sign structure of codebooks (libaff/quant/codebook_structure.cpp): hand-made
// entries against the definition, random structured tables found with their exact shift and
// base, and tables that are structured except in one place found unstructured (or at the
// smaller shift), including a sign-of-zero difference.
#include "libaff/core/error.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_structure.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace aff::quant;

namespace {

// A finite fp16 from a counter: any sign and mantissa, exponent 1..29 (no zero, no inf/NaN).
std::uint16_t random_fp16(std::uint64_t& state) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto r = static_cast<std::uint32_t>(state >> 33);
    const std::uint32_t exp = 1 + r % 29;
    return static_cast<std::uint16_t>(((r >> 8) & 0x8000u) | (exp << 10) | ((r >> 5) & 0x3ffu));
}

std::vector<std::uint32_t> random_base(int shift, std::uint64_t seed) {
    std::vector<std::uint32_t> base(static_cast<std::size_t>(Codebook::kEntries) >> shift);
    for (auto& b : base) b = random_fp16(seed) | static_cast<std::uint32_t>(random_fp16(seed)) << 16;
    return base;
}

std::vector<std::uint16_t> values(const Codebook& cb) {
    return {cb.fp16_values().begin(), cb.fp16_values().end()};
}

}  // namespace

TEST_CASE("sign structure: hand-made entries follow the definition", "[quant]") {
    // Base pair 0 = (1.0, 2.0), base pair 1 = (-0.5, 0.0).
    std::vector<std::uint32_t> base(512, 0x3c003c00u);
    base[0] = 0x40003c00u;
    base[1] = 0x0000b800u;
    const Codebook cb3 = expand_sign_structure(3, base);
    const auto v = cb3.fp16_values();
    const std::uint16_t want[16] = {
        0x3c00, 0x4000,  // 0: ( 1,  2)
        0xbc00, 0x4000,  // 1: (-1,  2)
        0x3c00, 0xc000,  // 2: ( 1, -2)
        0xbc00, 0xc000,  // 3: (-1, -2)
        0x4000, 0x3c00,  // 4: swapped ( 2,  1)
        0xc000, 0x3c00,  // 5: (-2,  1)
        0x4000, 0xbc00,  // 6: ( 2, -1)
        0xc000, 0xbc00,  // 7: (-2, -1)
    };
    for (int i = 0; i < 16; ++i) CHECK(v[i] == want[i]);
    // Entries 8..15 from base 1 = (-0.5, +0): flips give +0.5 and -0.
    CHECK(v[2 * 9] == 0x3800);
    CHECK(v[2 * 9 + 1] == 0x0000);
    CHECK(v[2 * 10 + 1] == 0x8000);
    CHECK(v[2 * 12] == 0x0000);  // swapped: c0 = +0
    CHECK(v[2 * 12 + 1] == 0xb800);
    CHECK(v[2 * 13] == 0x8000);

    const Codebook cb2 = expand_sign_structure(2, std::vector<std::uint32_t>(1024, 0x40003c00u));
    CHECK(cb2.fp16_values()[2 * 6] == 0x3c00);   // entry 6 (bits 1, 2): c1 negated, no swap
    CHECK(cb2.fp16_values()[2 * 6 + 1] == 0xc000);
}

TEST_CASE("sign structure: random structured tables are found with their shift and base", "[quant]") {
    for (const int shift : {3, 2}) {
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
            const auto base = random_base(shift, seed * 7919 + static_cast<std::uint64_t>(shift));
            const Codebook cb = expand_sign_structure(shift, base);
            const SignStructure s = find_sign_structure(cb);
            CHECK(s.shift == shift);
            CHECK(s.base == base);
            // The base expands back to the same bytes.
            CHECK(values(expand_sign_structure(s.shift, s.base)) == values(cb));
        }
    }
}

TEST_CASE("sign structure: an unstructured table has shift 0 and no base", "[quant]") {
    std::uint64_t seed = 42;
    std::vector<std::uint16_t> v(Codebook::kEntries * 2);
    for (auto& x : v) x = random_fp16(seed);
    const SignStructure s = find_sign_structure(Codebook(v));
    CHECK(s.shift == 0);
    CHECK(s.base.empty());
    // Shift 0 is the identity expansion of the 4096 packed entries.
    std::vector<std::uint32_t> all(Codebook::kEntries);
    for (int e = 0; e < Codebook::kEntries; ++e) all[e] = v[2 * e] | static_cast<std::uint32_t>(v[2 * e + 1]) << 16;
    CHECK(values(expand_sign_structure(0, all)) == v);
}

TEST_CASE("sign structure: one entry off breaks it", "[quant]") {
    const auto base3 = random_base(3, 99);
    const auto good = values(expand_sign_structure(3, base3));
    SECTION("one mantissa bit of a derived entry: no structure at all") {
        for (const int e : {1, 5, 2047, 4095}) {
            auto v = good;
            v[2 * e + (e & 1)] ^= 0x0001;
            const SignStructure s = find_sign_structure(Codebook(v));
            CHECK(s.shift == 0);
            CHECK(s.base.empty());
        }
    }
    SECTION("a base entry changed alone: no structure") {
        auto v = good;
        v[2 * 8 * 100 + 1] ^= 0x0400;  // exponent bit of c1 of base 100
        CHECK(find_sign_structure(Codebook(v)).shift == 0);
    }
    SECTION("a sign of zero: -0 where +0 is due") {
        auto base = base3;
        base[7] = 0x3c000000u;  // (+0, 1)
        auto v = values(expand_sign_structure(3, base));
        CHECK(find_sign_structure(Codebook(v)).shift == 3);
        v[2 * (8 * 7 + 1)] = 0x0000;  // entry 57 must hold -0 as c0
        CHECK(find_sign_structure(Codebook(v)).shift == 0);
    }
    SECTION("the swap half of one octet replaced by another pair's flips: shift 2 only") {
        auto v = good;
        const std::uint32_t other = 0x3c004400u;  // (4, 1)
        for (std::uint32_t w = 8 * 33 + 4; w < 8 * 33 + 8; ++w) {
            const std::uint32_t e = sign_structured_entry(2, other, w);
            v[2 * w] = static_cast<std::uint16_t>(e & 0xffff);
            v[2 * w + 1] = static_cast<std::uint16_t>(e >> 16);
        }
        const SignStructure s = find_sign_structure(Codebook(v));
        CHECK(s.shift == 2);
        REQUIRE(s.base.size() == 1024);
        CHECK(s.base[2 * 33 + 1] == other);
        CHECK(values(expand_sign_structure(2, s.base)) == v);
    }
}

TEST_CASE("sign structure: a wrong shift or base size is refused", "[quant]") {
    CHECK_THROWS_AS(expand_sign_structure(1, std::vector<std::uint32_t>(2048)), aff::Error);
    CHECK_THROWS_AS(expand_sign_structure(3, std::vector<std::uint32_t>(1024)), aff::Error);
    CHECK_THROWS_AS(expand_sign_structure(2, std::vector<std::uint32_t>(1023)), aff::Error);
    // A non-finite base value makes a codebook no reader accepts.
    CHECK_THROWS_AS(expand_sign_structure(3, std::vector<std::uint32_t>(512, 0x7c00u)), aff::Error);
}
