// The RoPE θ table (plain and YaRN, model doc §3.3) and the CPU twin of the RoPE kernel.
#include "libaff/gpu/reference/rope.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <string>

namespace aff {

RopeTable rope_table(const RopeConfig& c) {
    if (c.rot_dims <= 0 || c.rot_dims % 2 != 0 || c.rot_dims / 2 > kRopeMaxPairs)
        throw_unsupported("rope: rotary dims must be even and in 2..128, got " + std::to_string(c.rot_dims));
    if (c.base <= 1.0) throw_unsupported("rope: base must be > 1");
    RopeTable t;
    t.pairs = c.rot_dims / 2;
    const double d = c.rot_dims;
    double low = 0.0, high = 0.0;
    const bool yarn = c.yarn_factor != 1.0;
    if (yarn) {
        // Pair index whose wavelength completes `rotations` turns over the original context.
        auto correction = [&](double rotations) {
            return d * std::log(c.original_max_pos / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(c.base));
        };
        low = std::clamp(std::floor(correction(c.beta_fast)), 0.0, d - 1.0);
        high = std::clamp(std::ceil(correction(c.beta_slow)), 0.0, d - 1.0);
        if (high == low) high += 0.001;  // keeps the ramp finite
    }
    for (int j = 0; j < t.pairs; ++j) {
        const double f = std::pow(c.base, -2.0 * j / d);
        double theta = f;
        if (yarn) {
            const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
            theta = f / c.yarn_factor * ramp + f * (1.0 - ramp);
        }
        t.theta[j] = static_cast<float>(theta);
    }
    return t;
}

}  // namespace aff

namespace aff::cpu {

void rope(float* x, const int32_t* positions, int tokens, int vecs, int dim, const RopeTable& table, bool inverse) {
    const int first = dim - 2 * table.pairs;
    for (int t = 0; t < tokens; ++t)
        for (int v = 0; v < vecs; ++v) {
            float* p = x + (static_cast<std::size_t>(t) * vecs + v) * dim + first;
            for (int j = 0; j < table.pairs; ++j) {
                // The angle is rounded to fp32 exactly as on the GPU (and in the reference).
                const float angle = static_cast<float>(positions[t]) * table.theta[j];
                const double c = std::cos(static_cast<double>(angle));
                const double s = (inverse ? -1.0 : 1.0) * std::sin(static_cast<double>(angle));
                const double even = p[2 * j], odd = p[2 * j + 1];
                p[2 * j] = static_cast<float>(even * c - odd * s);
                p[2 * j + 1] = static_cast<float>(even * s + odd * c);
            }
        }
}

}  // namespace aff::cpu
