// Manifold-constrained hyper-connections on the GPU (model doc §3.2): the mHC pre step
// (projection of the RMS-normalised streams, pre/post/comb with Sinkhorn, collapse), the
// expand step after a sub-block, and the hyper head at the end of the stack. n = hc_mult
// streams: 4 in V4-Flash, 1..kHcMaxStreams accepted (the tiny test models use 2 and 3).
// Host-callable declarations only; device code in hc.hip, CPU twin in libaff/gpu/reference/.
#pragma once

#include <cstddef>

namespace aff::gpu {

inline constexpr int kHcStreams = 4;                                // hc_mult of V4-Flash
inline constexpr int kHcMaxStreams = 8;
inline constexpr int hc_mix_rows(int streams) { return (2 + streams) * streams; }  // pre | post | comb
inline constexpr int kHcMixRows = hc_mix_rows(kHcStreams);          // 24

// Device pointers to one sub-block's parameters (fp32, as in the checkpoint):
// fn [rows, n·dim] (rows = 24 for a sub-block, 4 for the head), base [rows],
// scale [3] for a sub-block, [1] for the head.
struct HcWeights {
    const float* fn = nullptr;
    const float* base = nullptr;
    const float* scale = nullptr;
};

struct HcConfig {
    int dim = 4096;            // D
    int sinkhorn_iters = 20;   // hc_sinkhorn_iters
    float hc_eps = 1e-6f;
    float norm_eps = 1e-6f;    // rms_norm_eps, for the RMS of the n·D concatenation
    int streams = kHcStreams;  // n = hc_mult, 1..kHcMaxStreams
};

// Pre step for `tokens` tokens of x [tokens][n][dim]: writes post [tokens][n],
// comb [tokens][n][n] (comb[a][b], row-major) and the collapsed input u [tokens][dim].
// scratch holds tokens·(hc_mix_rows(n) + 1) floats. All pointers are device memory.
void hc_pre(const float* x, int tokens, const HcWeights& w, const HcConfig& c, float* scratch,
            float* post, float* comb, float* u, void* stream);

// Expand, in place: x'[b] = post_b · f + Σ_a comb[a][b] · x[a] for x [tokens][n][dim] and the
// sub-block output f [tokens][dim].
void hc_post(float* x, const float* f, const float* post, const float* comb, int tokens, int dim,
             void* stream, int streams = kHcStreams);

// Hyper head: y [tokens][dim] = Σ_k p_k · x[k], p = sigmoid(scale·z + base) + hc_eps with
// z = fn · v / rms(v). scratch holds tokens·(n + 1) floats.
void hc_head(const float* x, int tokens, const HcWeights& w, const HcConfig& c, float* scratch, float* y,
             void* stream);

// One mHC site of a decode step in two launches instead of four (hc_post, hc_pre's two,
// rms_norm), for 1..kHcSiteMaxTokens tokens and 1..kHcSiteMaxStreams streams (hc_site_takes):
// when f is given, the expand of the previous sub-block first (x updated in place from post
// and comb, as hc_post); then the pre step of the next sub-block with w (post and comb written
// anew, as hc_pre) and the RMSNorm of its collapsed input with norm_w (null: unweighted):
// a [tokens][dim] = rms_norm(Σ_k pre_k x_k) · norm_w. The projection is split over the
// channels and summed in a fixed order: the same result on every run. scratch holds
// hc_site_scratch_floats(tokens, c) floats.
inline constexpr int kHcSiteMaxTokens = 4;
inline constexpr int kHcSiteMaxStreams = 4;
bool hc_site_takes(int tokens, const HcConfig& c);
std::size_t hc_site_scratch_floats(int tokens, const HcConfig& c);
void hc_site(float* x, const float* f, float* post, float* comb, int tokens, const HcWeights& w, const HcConfig& c,
             const float* norm_w, float* scratch, float* a, void* stream);

// The last site: the expand of the last sub-block (when f is given), the hyper head with w
// and the final norm: y [tokens][dim] = rms_norm(Σ_k p_k x_k) · norm_w.
void hc_head_site(float* x, const float* f, const float* post, const float* comb, int tokens, const HcWeights& w,
                  const HcConfig& c, const float* norm_w, float* scratch, float* y, void* stream);

// fp32 dot products of 16384 terms summed in another order, then 39 Sinkhorn divisions.
inline constexpr double hc_max_nmse = 1e-8;

}  // namespace aff::gpu
