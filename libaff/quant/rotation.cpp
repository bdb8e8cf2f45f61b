// Randomised Hadamard transform (rotation.hpp). The signs come from splitmix64 of the
// column index so that the spec can define them in one line and a GPU kernel can
// compute them instead of loading a table.
#include "aff/quant/rotation.hpp"

#include "aff/core/error.hpp"
#include "aff/core/hash.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

namespace {

void walsh_hadamard(float* v, std::size_t n) {
    for (std::size_t len = 1; len < n; len <<= 1)
        for (std::size_t i = 0; i < n; i += 2 * len)
            for (std::size_t j = i; j < i + len; ++j) {
                const float a = v[j], b = v[j + len];
                v[j] = a + b;
                v[j + len] = a - b;
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
