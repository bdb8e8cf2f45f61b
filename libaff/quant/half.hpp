// Half-precision conversions the quantised format needs: codebook entries are IEEE
// binary16 (fp16) and block scales are bfloat16 (formats/quant-codebook.md §3, §4).
// Round-to-nearest-even, so an encoder and every decoder agree bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace aff::quant {

inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// NaN stays NaN (quiet); finite values round to nearest even, overflowing to infinity.
inline std::uint16_t float_to_bf16(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

inline float fp16_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return std::bit_cast<float>(sign);
        // Subnormal: value = man · 2^-24.
        const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

inline std::uint16_t float_to_fp16(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u;             // NaN
    if (a >= 0x477FF000u) return sign | 0x7C00u;            // rounds to >= 65520: infinity
    if (a < 0x38800000u) {                                  // below the smallest normal 2^-14
        // Subnormal or zero: round |f| / 2^-24 to nearest even integer.
        const float v = std::bit_cast<float>(a) * 16777216.0f;  // exact scaling by 2^24
        std::uint32_t q = static_cast<std::uint32_t>(v);
        const float rest = v - static_cast<float>(q);
        if (rest > 0.5f || (rest == 0.5f && (q & 1u))) ++q;
        return static_cast<std::uint16_t>(sign | q);
    }
    std::uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (((r >> 13) - (112u << 10)) & 0x7FFFu));
}

}  // namespace aff::quant
