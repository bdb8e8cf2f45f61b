// Generators of the weight rows the encoder's digest tests quantise, shared by the CPU
// digests (tests/unit/quant/quantize_digest_test.cpp) and the GPU search's run of the same
// cases (tests/gpu/trellis_encode_test.cpp): both must feed the encoder identical inputs,
// so the pinned digests mean the same thing on both sides.
#pragma once

#include "libaff/quant/codebook_train.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace aff::test {

// Gaussian rows with magnitudes varying by row (2^-3 … 2^1) so block scales differ.
inline std::vector<float> rows_of_varying_scale(std::size_t rows, std::size_t cols, std::uint64_t seed) {
    std::vector<float> w(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < cols; ++j)
            w[r * cols + j] = std::ldexp(static_cast<float>(aff::quant::gaussian_sample(seed, r * cols + j)),
                                         static_cast<int>(r % 5) - 3);
    return w;
}

// FP4-like rows: E2M1 codes times a power-of-two scale per 32 columns, as the official
// checkpoint's experts dequantise; many weights are exactly equal (ties in the search).
inline std::vector<float> fp4_like(std::size_t rows, std::size_t cols, std::uint64_t seed) {
    static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    std::vector<float> w(rows * cols);
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double g = aff::quant::gaussian_sample(seed, i), s = aff::quant::gaussian_sample(seed + 1, i / 32);
        const int code = static_cast<int>(std::fabs(g) * 2.5) & 7;
        w[i] = std::ldexp(g < 0 ? -kE2M1[code] : kE2M1[code], -8 + static_cast<int>(std::fabs(s) * 2) % 3);
    }
    return w;
}

// Positive per-column importances (log-normal), as an imatrix would give.
inline std::vector<float> importance_of(std::size_t cols, std::uint64_t seed) {
    std::vector<float> q(cols);
    for (std::size_t j = 0; j < cols; ++j) q[j] = std::exp(static_cast<float>(aff::quant::gaussian_sample(seed, j)));
    return q;
}

}  // namespace aff::test
