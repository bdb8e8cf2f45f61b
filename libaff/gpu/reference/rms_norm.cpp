// CPU twin of the RMSNorm kernels (see rms_norm.hpp).
#include "libaff/gpu/reference/rms_norm.hpp"

#include <cmath>
#include <cstddef>

namespace aff::cpu {

void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = x + static_cast<std::size_t>(r) * n;
        float* yr = y + static_cast<std::size_t>(r) * n;
        double ss = 0.0;
        for (int i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) {
            const double v = xr[i] * inv;
            yr[i] = static_cast<float>(w ? v * w[i] : v);
        }
    }
}

}  // namespace aff::cpu
