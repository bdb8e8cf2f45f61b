// Decoding of the small float formats (see dtype.hpp and model doc §2.1).
#include "libaff/checkpoint/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace aff {

namespace {
struct Entry {
    DType dtype;
    std::string_view name;
    std::size_t size;
};
constexpr Entry table[] = {
    {DType::bf16, "BF16", 2},    {DType::f16, "F16", 2},         {DType::f32, "F32", 4},
    {DType::i64, "I64", 8},      {DType::i32, "I32", 4},         {DType::f8_e4m3, "F8_E4M3", 1},
    {DType::f8_e8m0, "F8_E8M0", 1}, {DType::i8, "I8", 1},        {DType::u8, "U8", 1},
    {DType::boolean, "BOOL", 1},
};
}  // namespace

std::optional<DType> parse_dtype(std::string_view name) {
    for (const Entry& e : table)
        if (e.name == name) return e.dtype;
    return std::nullopt;
}

std::string_view dtype_name(DType dtype) {
    for (const Entry& e : table)
        if (e.dtype == dtype) return e.name;
    return "?";
}

std::size_t dtype_size(DType dtype) {
    for (const Entry& e : table)
        if (e.dtype == dtype) return e.size;
    return 0;
}

float f16_to_f32(std::uint16_t h) {
    const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
    else if (exp == 31) v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
    return sign ? -v : v;
}

std::uint16_t f32_to_bf16(float value) {
    std::uint32_t u;
    std::memcpy(&u, &value, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
    u += 0x7fff + ((u >> 16) & 1);
    return static_cast<std::uint16_t>(u >> 16);
}

float e4m3_to_f32(std::uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 7;
    if (exp == 15 && mant == 7) return std::numeric_limits<float>::quiet_NaN();
    float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)            // subnormal: m/8 · 2^-6
                       : std::ldexp(static_cast<float>(8 + mant), exp - 10);  // (1+m/8) · 2^(e-7)
    return sign ? -v : v;
}

float e8m0_to_f32(std::uint8_t b) {
    if (b == 255) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

float e2m1_to_f32(std::uint8_t code) {
    static constexpr float magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float v = magnitude[code & 7];
    return (code & 8) ? -v : v;
}

}  // namespace aff
