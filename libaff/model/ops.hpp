// The model's scalar building blocks (model doc §3.1, §3.3), shared by the CPU forward
// (forward.cpp) and the attention ops it exposes to the GPU twins (attention_ops.cpp). One
// definition, so the CPU reference and the twins the device tests compare against cannot drift.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace aff::ops {

inline float dot(const float* a, const float* b, int n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; ++i) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

// y = w ⊙ x / rms(x) (w null: unweighted), §3.1.
inline void rms_norm(const float* x, int d, const float* w, double eps, float* y) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(x[i]) * x[i];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    for (int i = 0; i < d; ++i) y[i] = w ? w[i] * (x[i] * r) : x[i] * r;
}

// Interleaved RoPE on pairs (x[2j], x[2j+1]) of the rotary slice, §3.3; inverse = the
// conjugate rotation used to de-rotate the attention output (§3.4).
inline void rope(float* x, const std::vector<float>& inv_freq, std::int64_t pos, bool inverse = false) {
    for (std::size_t j = 0; j < inv_freq.size(); ++j) {
        const float angle = inv_freq[j] * static_cast<float>(pos);  // float32, as the oracle computes it
        const float c = static_cast<float>(std::cos(double(angle)));
        const float s = static_cast<float>(std::sin(double(angle))) * (inverse ? -1.0f : 1.0f);
        const float e = x[2 * j], o = x[2 * j + 1];
        x[2 * j] = e * c - o * s;
        x[2 * j + 1] = o * c + e * s;
    }
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold

}  // namespace aff::ops
