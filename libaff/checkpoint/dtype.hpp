// The element types found in DeepSeek-V4 safetensors files and how each decodes to
// float (model doc §2.1): BF16/F16/F32 plain, F8_E4M3 ("fn": bias 7, max 448, no inf),
// F8_E8M0 power-of-two scales, I8 holding packed FP4 E2M1 pairs, I64 indices. The
// checkpoint loader dispatches on these, never on tensor names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aff {

enum class DType { bf16, f16, f32, i64, i32, f8_e4m3, f8_e8m0, i8, u8, boolean };

// The safetensors spelling ("BF16", "F8_E4M3", ...); nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);
std::string_view dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

inline float bf16_to_f32(std::uint16_t bits) {
    std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
float f16_to_f32(std::uint16_t bits);
// Rounds to nearest even, as torch does when casting float32 to bfloat16.
std::uint16_t f32_to_bf16(float value);
float e4m3_to_f32(std::uint8_t bits);
// 2^(bits-127); 255 is NaN.
float e8m0_to_f32(std::uint8_t bits);
// FP4 E2M1 code (low 4 bits; bit 3 is the sign) to its value.
float e2m1_to_f32(std::uint8_t code);

}  // namespace aff
