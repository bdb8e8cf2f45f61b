// Test-only measures of how far one model's next-token distributions are from another's
// over the same positions: mean KL(p_orig || p_other) in nats, top-1 agreement, and the
// original's mean entropy (what a KL is small against).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace aff::test {

struct Divergence {
    double kl = 0, top1 = 0, entropy = 0;
};

// Both [S, V] logits. Positions count equally.
inline Divergence divergence(const std::vector<float>& orig, const std::vector<float>& other, int V) {
    const std::size_t S = orig.size() / V;
    Divergence d;
    for (std::size_t p = 0; p < S; ++p) {
        const float* a = &orig[p * V];
        const float* b = &other[p * V];
        const double ma = *std::max_element(a, a + V), mb = *std::max_element(b, b + V);
        double za = 0, zb = 0;
        for (int v = 0; v < V; ++v) za += std::exp(a[v] - ma), zb += std::exp(b[v] - mb);
        double kl = 0, h = 0;
        for (int v = 0; v < V; ++v) {
            const double la = a[v] - ma - std::log(za), lb = b[v] - mb - std::log(zb);
            kl += std::exp(la) * (la - lb);
            h -= std::exp(la) * la;
        }
        d.kl += kl;
        d.entropy += h;
        d.top1 += (std::max_element(a, a + V) - a) == (std::max_element(b, b + V) - b);
    }
    d.kl /= double(S);
    d.top1 /= double(S);
    d.entropy /= double(S);
    return d;
}

}  // namespace aff::test
