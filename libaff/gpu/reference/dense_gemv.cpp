// CPU twins of the dense GEMV, embedding and SwiGLU kernels (see dense_gemv.hpp).
#include "libaff/gpu/reference/dense_gemv.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace aff::cpu {

float bf16_to_float(uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t float_to_bf16(float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

namespace {
double weight(const void* w, gpu::DenseType type, std::size_t i) {
    return type == gpu::DenseType::bf16 ? bf16_to_float(static_cast<const uint16_t*>(w)[i])
                                        : static_cast<const float*>(w)[i];
}

void gemv_rows(const void* w, gpu::DenseType type, std::size_t first, int n, int k, const float* x, float* y) {
    for (int r = 0; r < n; ++r) {
        double acc = 0.0;
        for (int c = 0; c < k; ++c) acc += weight(w, type, first + static_cast<std::size_t>(r) * k + c) * x[c];
        y[r] = static_cast<float>(acc);
    }
}
}  // namespace

void dense_gemv(const void* w, gpu::DenseType type, int n, int k, const float* x, int ldx, int batch, float* y,
                int ldy) {
    for (int b = 0; b < batch; ++b)
        gemv_rows(w, type, 0, n, k, x + static_cast<std::size_t>(b) * ldx, y + static_cast<std::size_t>(b) * ldy);
}

void dense_gemv_indexed(const void* w, gpu::DenseType type, int n, int k, const int32_t* ids, int jobs,
                        const float* x, int x_group, float* y) {
    for (int j = 0; j < jobs; ++j)
        gemv_rows(w, type, static_cast<std::size_t>(ids[j]) * n * k, n, k, x + static_cast<std::size_t>(j / x_group) * k,
                  y + static_cast<std::size_t>(j) * n);
}

void embed(const void* table, gpu::DenseType type, int dim, const int32_t* tokens, int n, int copies, float* out) {
    for (int t = 0; t < n; ++t)
        for (int s = 0; s < copies; ++s)
            for (int d = 0; d < dim; ++d)
                out[(static_cast<std::size_t>(t) * copies + s) * dim + d] =
                    static_cast<float>(weight(table, type, static_cast<std::size_t>(tokens[t]) * dim + d));
}

void swiglu(const float* gate, const float* up, long long count, float limit, float* out) {
    for (long long i = 0; i < count; ++i) {
        const double g = std::min(gate[i], limit);
        const double u = std::clamp(up[i], -limit, limit);
        out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
}

void moe_combine(const float* routed, const float* weights, int tokens, int k, int dim, const float* shared,
                 float* out) {
    for (int t = 0; t < tokens; ++t)
        for (int d = 0; d < dim; ++d) {
            double acc = 0.0;
            for (int j = 0; j < k; ++j)
                acc += static_cast<double>(routed[(static_cast<std::size_t>(t) * k + j) * dim + d]) * weights[t * k + j];
            if (shared) acc += shared[static_cast<std::size_t>(t) * dim + d];
            out[static_cast<std::size_t>(t) * dim + d] = static_cast<float>(acc);
        }
}

}  // namespace aff::cpu
