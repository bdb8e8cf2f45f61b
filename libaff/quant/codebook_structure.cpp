// Finding and expanding the sign structure of a codebook (codebook_structure.hpp). Exact bit
// comparisons only: a table counts as structured when every entry equals its base pair after
// the sign-bit XORs (and swap) the definition names, nothing approximate.
#include "libaff/quant/codebook_structure.hpp"

#include "libaff/core/error.hpp"

#include <string>

namespace aff::quant {

std::uint32_t sign_structured_entry(int shift, std::uint32_t base_pair, std::uint32_t w) {
    std::uint32_t e = base_pair;
    if (shift == 3 && (w & 4u)) e = (e >> 16) | (e << 16);  // swap c0 and c1
    if (shift >= 2) e ^= ((w & 1u) ? 0x00008000u : 0u) | ((w & 2u) ? 0x80000000u : 0u);
    return e;
}

namespace {

std::uint32_t packed(const Codebook& cb, int e) {
    const auto v = cb.fp16_values();
    return static_cast<std::uint32_t>(v[2 * e]) | static_cast<std::uint32_t>(v[2 * e + 1]) << 16;
}

bool holds(const Codebook& cb, int shift) {
    for (int w = 0; w < Codebook::kEntries; ++w) {
        const int stored = w & ~((1 << shift) - 1);
        if (packed(cb, w) != sign_structured_entry(shift, packed(cb, stored), static_cast<std::uint32_t>(w)))
            return false;
    }
    return true;
}

}  // namespace

SignStructure find_sign_structure(const Codebook& cb) {
    SignStructure s;
    for (const int shift : {3, 2}) {
        if (!holds(cb, shift)) continue;
        s.shift = shift;
        s.base.resize(Codebook::kEntries >> shift);
        for (std::size_t b = 0; b < s.base.size(); ++b) s.base[b] = packed(cb, static_cast<int>(b << shift));
        return s;
    }
    return s;
}

Codebook expand_sign_structure(int shift, const std::vector<std::uint32_t>& base) {
    if (shift != 0 && shift != 2 && shift != 3)
        throw_usage("sign structure shift " + std::to_string(shift) + " is not 0, 2 or 3");
    const std::size_t want = static_cast<std::size_t>(Codebook::kEntries) >> shift;
    if (base.size() != want)
        throw_usage("sign structure base has " + std::to_string(base.size()) + " pairs, shift " +
                    std::to_string(shift) + " needs " + std::to_string(want));
    std::vector<std::uint16_t> v(Codebook::kEntries * Codebook::kDim);
    for (std::uint32_t w = 0; w < static_cast<std::uint32_t>(Codebook::kEntries); ++w) {
        const std::uint32_t e = sign_structured_entry(shift, base[w >> shift], w);
        v[2 * w] = static_cast<std::uint16_t>(e & 0xffffu);
        v[2 * w + 1] = static_cast<std::uint16_t>(e >> 16);
    }
    return Codebook(v);
}

}  // namespace aff::quant
