// Randomised Hadamard transform (rotation.hpp). The signs come from splitmix64 of the
// column index so that the spec can define them in one line and a GPU kernel can
// compute them instead of loading a table.
#include "libaff/quant/rotation.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

namespace {

// Stage len pairs v[j] with v[j + len] (a + b, a - b) for len = 1, 2, 4, … Any order of the
// pairs within a stage gives the same bits, so the first three stages run together on each
// group of 8 in registers (as separate stages their inner loops are too short to
// vectorise) and the later ones as two disjoint halves the compiler can vectorise.
void walsh_hadamard(float* v, std::size_t n) {
    std::size_t len = 1;
    if (n >= 8) {
        for (std::size_t i = 0; i < n; i += 8) {
            float* p = v + i;
            const float a0 = p[0] + p[1], a1 = p[0] - p[1], a2 = p[2] + p[3], a3 = p[2] - p[3];
            const float a4 = p[4] + p[5], a5 = p[4] - p[5], a6 = p[6] + p[7], a7 = p[6] - p[7];
            const float b0 = a0 + a2, b2 = a0 - a2, b1 = a1 + a3, b3 = a1 - a3;
            const float b4 = a4 + a6, b6 = a4 - a6, b5 = a5 + a7, b7 = a5 - a7;
            p[0] = b0 + b4, p[4] = b0 - b4, p[1] = b1 + b5, p[5] = b1 - b5;
            p[2] = b2 + b6, p[6] = b2 - b6, p[3] = b3 + b7, p[7] = b3 - b7;
        }
        len = 8;
    }
    for (; len < n; len <<= 1)
        for (std::size_t i = 0; i < n; i += 2 * len) {
            float* __restrict lo = v + i;
            float* __restrict hi = v + i + len;
            for (std::size_t j = 0; j < len; ++j) {
                const float a = lo[j], b = hi[j];
                lo[j] = a + b;
                hi[j] = a - b;
            }
        }
}

// The signs of the first kSignTable columns, computed once: rotate and unrotate run per
// row and per activation vector, and splitmix64 per element cost more than the transform.
constexpr std::size_t kSignTable = std::size_t{1} << 16;
const float* sign_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(kSignTable);
        for (std::size_t i = 0; i < kSignTable; ++i) t[i] = rotation_sign(i);
        return t;
    }();
    return table.data();
}

void check(std::size_t n) {
    if (!rotation_supported(n)) throw_internal("rotation of a dimension that is not a power of two: " + std::to_string(n));
}

}  // namespace

bool rotation_supported(std::size_t n) { return n >= 2 && (n & (n - 1)) == 0; }

float rotation_sign(std::size_t i) {
    const std::uint64_t x = splitmix64_mix(0x616666726f746174ull + static_cast<std::uint64_t>(i) * kSplitmix64Gamma);
    return (x >> 63) ? -1.0f : 1.0f;
}

void rotate(float* v, std::size_t n) {
    check(n);
    if (n <= kSignTable) {
        const float* sign = sign_table();
        for (std::size_t i = 0; i < n; ++i) v[i] *= sign[i];
    } else {
        for (std::size_t i = 0; i < n; ++i) v[i] *= rotation_sign(i);
    }
    walsh_hadamard(v, n);
    const float norm = 1.0f / std::sqrt(static_cast<float>(n));
    for (std::size_t i = 0; i < n; ++i) v[i] *= norm;
}

void unrotate(float* v, std::size_t n) {
    check(n);
    walsh_hadamard(v, n);
    const float norm = 1.0f / std::sqrt(static_cast<float>(n));
    if (n <= kSignTable) {
        const float* sign = sign_table();
        for (std::size_t i = 0; i < n; ++i) v[i] *= norm * sign[i];
    } else {
        for (std::size_t i = 0; i < n; ++i) v[i] *= norm * rotation_sign(i);
    }
}

}  // namespace aff::quant
