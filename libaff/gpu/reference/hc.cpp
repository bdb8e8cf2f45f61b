// CPU twin of the mHC kernels (see hc.hpp): the steps of model doc §3.2 in order, in double.
#include "libaff/gpu/reference/hc.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace aff::cpu {
namespace {

constexpr int kMax = gpu::kHcMaxStreams;

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// z[r] = fn[r] · v / rms(v) for r < rows, v = the token's n·dim stream values.
std::vector<double> project(const float* v, const float* fn, int rows, int width, double norm_eps) {
    double ss = 0.0;
    for (int i = 0; i < width; ++i) ss += static_cast<double>(v[i]) * v[i];
    const double inv = 1.0 / std::sqrt(ss / width + norm_eps);
    std::vector<double> z(rows);
    for (int r = 0; r < rows; ++r) {
        double dot = 0.0;
        const float* f = fn + static_cast<std::size_t>(r) * width;
        for (int i = 0; i < width; ++i) dot += static_cast<double>(f[i]) * v[i];
        z[r] = dot * inv;
    }
    return z;
}

}  // namespace

void hc_pre(const float* x, int tokens, const gpu::HcWeights& w, const gpu::HcConfig& c, float* post, float* comb,
            float* u) {
    const int kN = c.streams, width = kN * c.dim;
    for (int t = 0; t < tokens; ++t) {
        const float* xt = x + static_cast<std::size_t>(t) * width;
        const std::vector<double> z = project(xt, w.fn, gpu::hc_mix_rows(kN), width, c.norm_eps);
        double pre[kMax];
        for (int k = 0; k < kN; ++k) {
            pre[k] = sigmoid(w.scale[0] * z[k] + w.base[k]) + c.hc_eps;
            post[t * kN + k] = static_cast<float>(2.0 * sigmoid(w.scale[1] * z[kN + k] + w.base[kN + k]));
        }
        double m[kMax][kMax];
        for (int a = 0; a < kN; ++a) {  // row softmax, then + eps
            double mx = -1e300, sum = 0.0;
            for (int b = 0; b < kN; ++b) {
                m[a][b] = w.scale[2] * z[2 * kN + a * kN + b] + w.base[2 * kN + a * kN + b];
                mx = std::max(mx, m[a][b]);
            }
            for (int b = 0; b < kN; ++b) sum += (m[a][b] = std::exp(m[a][b] - mx));
            for (int b = 0; b < kN; ++b) m[a][b] = m[a][b] / sum + c.hc_eps;
        }
        for (int it = 0; it < c.sinkhorn_iters; ++it) {
            if (it > 0)  // row normalisation (not in the first iteration: the softmax did it)
                for (int a = 0; a < kN; ++a) {
                    double sum = 0.0;
                    for (int b = 0; b < kN; ++b) sum += m[a][b];
                    for (int b = 0; b < kN; ++b) m[a][b] /= sum + c.hc_eps;
                }
            for (int b = 0; b < kN; ++b) {  // column normalisation
                double sum = 0.0;
                for (int a = 0; a < kN; ++a) sum += m[a][b];
                for (int a = 0; a < kN; ++a) m[a][b] /= sum + c.hc_eps;
            }
        }
        for (int a = 0; a < kN; ++a)
            for (int b = 0; b < kN; ++b) comb[(t * kN + a) * kN + b] = static_cast<float>(m[a][b]);
        for (int d = 0; d < c.dim; ++d) {
            double acc = 0.0;
            for (int k = 0; k < kN; ++k) acc += pre[k] * xt[k * c.dim + d];
            u[static_cast<std::size_t>(t) * c.dim + d] = static_cast<float>(acc);
        }
    }
}

void hc_post(float* x, const float* f, const float* post, const float* comb, int tokens, int dim, int streams) {
    const int kN = streams;
    for (int t = 0; t < tokens; ++t) {
        float* xt = x + static_cast<std::size_t>(t) * kN * dim;
        const float* ct = comb + t * kN * kN;
        for (int d = 0; d < dim; ++d) {
            double in[kMax];
            for (int a = 0; a < kN; ++a) in[a] = xt[a * dim + d];
            for (int b = 0; b < kN; ++b) {
                // New stream b takes column b of comb: Σ over the first index (pitfall 1).
                double acc = static_cast<double>(post[t * kN + b]) * f[static_cast<std::size_t>(t) * dim + d];
                for (int a = 0; a < kN; ++a) acc += static_cast<double>(ct[a * kN + b]) * in[a];
                xt[b * dim + d] = static_cast<float>(acc);
            }
        }
    }
}

void hc_head(const float* x, int tokens, const gpu::HcWeights& w, const gpu::HcConfig& c, float* y) {
    const int kN = c.streams, width = kN * c.dim;
    for (int t = 0; t < tokens; ++t) {
        const float* xt = x + static_cast<std::size_t>(t) * width;
        const std::vector<double> z = project(xt, w.fn, kN, width, c.norm_eps);
        double p[kMax];
        for (int k = 0; k < kN; ++k) p[k] = sigmoid(w.scale[0] * z[k] + w.base[k]) + c.hc_eps;
        for (int d = 0; d < c.dim; ++d) {
            double acc = 0.0;
            for (int k = 0; k < kN; ++k) acc += p[k] * xt[k * c.dim + d];
            y[static_cast<std::size_t>(t) * c.dim + d] = static_cast<float>(acc);
        }
    }
}

}  // namespace aff::cpu
