// CPU twin of the FP8 GEMV (see fp8_gemv.hpp): decode every weight exactly, sum in double.
#include "libaff/gpu/reference/fp8_gemv.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace aff::cpu {

float e4m3_to_float(uint8_t b) {
    const int sign = (b & 0x80) ? -1 : 1;
    const int exponent = (b >> 3) & 0xf;
    const int mantissa = b & 0x7;
    if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
    if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa / 8.0, -6));  // subnormal
    return static_cast<float>(sign * std::ldexp(1.0 + mantissa / 8.0, exponent - 7));
}

float e8m0_to_float(uint8_t b) {
    if (b == 255) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

void fp8_gemv(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y) {
    const int kblocks = (k + 127) / 128;
    float table[256];
    for (int i = 0; i < 256; ++i) table[i] = e4m3_to_float(static_cast<uint8_t>(i));
    for (int r = 0; r < n; ++r) {
        const uint8_t* wr = w + static_cast<std::size_t>(r) * k;
        const uint8_t* sr = scales + static_cast<std::size_t>(r / 128) * kblocks;
        for (int b = 0; b < batch; ++b) {
            const float* xb = x + static_cast<std::size_t>(b) * k;
            double acc = 0.0;
            for (int c = 0; c < k; ++c)
                acc += static_cast<double>(table[wr[c]]) * e8m0_to_float(sr[c / 128]) * xb[c];
            y[static_cast<std::size_t>(b) * n + r] = static_cast<float>(acc);
        }
    }
}

}  // namespace aff::cpu
