// Viterbi encoder and reference decoder of the 92-byte trellis block
// (formats/quant-codebook.md §4). The window of step t is the last 12 bits of the
// block's index stream up to the end of step t's fresh bits, read most significant bit
// first; the search keeps, for every window, the cheapest path that ends in it.
// The hot loop is compiled for AVX2 and for the baseline ISA; both clones do the same
// float operations in the same order, so the output does not depend on the machine.
#include "aff/quant/trellis.hpp"

#include "aff/core/error.hpp"
#include "aff/quant/half.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace aff::quant {

namespace {

constexpr int kL = Codebook::kWindowBits;
constexpr int kWindows = Codebook::kEntries;
constexpr int kMaxStates = 128;  // 2^(12 - 5)

// The search keeps best_t[u] = min over predecessors of the cost of the old window,
// for every u = the low 12-k_t bits the new window inherits (best[t] below). The cost
// of window w at step t is best_t[w >> k_t] + d_t(w). Only best_t is stored; the
// traceback recomputes the few costs it compares, with the same float operations, so
// the forward pass needs no argmin bookkeeping.
inline float distance(float y0, float y1, float q0, float q1, float c0, float c1) {
    const float e0 = y0 - c0, e1 = y1 - c1;
    return q0 * e0 * e0 + q1 * e1 * e1;
}

// Step t with K fresh bits: computes every window's cost and folds it into the next
// step's best (index w mod nextU), or, on the last step, nothing is folded and the
// caller scans the costs written to `last`.
template <int K>
[[gnu::always_inline]] inline void step(const float* __restrict best, float* __restrict next_best, int next_u,
                                        float* __restrict last, const float* __restrict c0,
                                        const float* __restrict c1, float y0, float y1, float q0, float q1) {
    constexpr int U = 1 << (kL - K), H = 1 << K;
    const int mask = next_u - 1;
    for (int u = 0; u < U; ++u) {
        const float m = best[u];
        const float* __restrict a0 = c0 + (u << K);
        const float* __restrict a1 = c1 + (u << K);
        if (last) {
            float* __restrict out = last + (u << K);
            for (int b = 0; b < H; ++b) out[b] = m + distance(y0, y1, q0, q1, a0[b], a1[b]);
        } else {
            float* __restrict acc = next_best + ((u << K) & mask);
            for (int b = 0; b < H; ++b) {
                const float cost = m + distance(y0, y1, q0, q1, a0[b], a1[b]);
                acc[b] = cost < acc[b] ? cost : acc[b];
            }
        }
    }
}

// Fills windows[] with the cheapest window sequence for targets y (already divided by
// the scale) and weights q; returns its cost in those units. best: kBlockSteps ×
// kMaxStates floats; last: kWindows floats.
[[gnu::target_clones("avx512f", "avx2", "default")]] float viterbi(const float* y, const float* q, const float* c0,
                                                                    const float* c1, float* best, float* last,
                                                                    std::uint16_t* windows) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    // best_0: only the all-zero start window exists, and it is its own u = 0.
    for (int u = 0; u < kMaxStates; ++u) best[u] = inf;
    best[0] = 0.0f;
    for (int t = 0; t < kBlockSteps; ++t) {
        const bool final_step = t + 1 == kBlockSteps;
        float* next = final_step ? nullptr : best + (t + 1) * kMaxStates;
        const int next_u = final_step ? 1 : 1 << (kL - kStepBits[(t + 1) % 8]);
        if (next)
            for (int u = 0; u < next_u; ++u) next[u] = inf;
        const float* cur = best + t * kMaxStates;
        if (kStepBits[t % 8] == 6)
            step<6>(cur, next, next_u, final_step ? last : nullptr, c0, c1, y[2 * t], y[2 * t + 1], q[2 * t],
                    q[2 * t + 1]);
        else
            step<5>(cur, next, next_u, final_step ? last : nullptr, c0, c1, y[2 * t], y[2 * t + 1], q[2 * t],
                    q[2 * t + 1]);
    }
    int w = 0;
    for (int i = 1; i < kWindows; ++i)
        if (last[i] < last[w]) w = i;
    const float total = last[w];
    for (int t = kBlockSteps - 1; t >= 1; --t) {
        windows[t] = static_cast<std::uint16_t>(w);
        // The predecessor: among old windows (h << (12-k)) | u, the cheapest, smallest h on ties.
        const int k = kStepBits[t % 8], u = w >> k, prev_k = kStepBits[(t - 1) % 8];
        const float* prev_best = best + (t - 1) * kMaxStates;
        int chosen = -1;
        float chosen_cost = inf;
        for (int h = 0; h < (1 << k); ++h) {
            const int old = (h << (kL - k)) | u;
            const float c = prev_best[old >> prev_k] +
                            distance(y[2 * t - 2], y[2 * t - 1], q[2 * t - 2], q[2 * t - 1], c0[old], c1[old]);
            if (chosen < 0 || c < chosen_cost) {
                chosen = old;
                chosen_cost = c;
            }
        }
        w = chosen;
    }
    windows[0] = static_cast<std::uint16_t>(w);
    return total;
}

void put_bits(std::uint8_t* out, int end_bit, int k, unsigned value) {
    for (int i = 0; i < k; ++i) {
        const int bit = end_bit - k + i;  // most significant fresh bit first
        if ((value >> (k - 1 - i)) & 1u) out[bit >> 3] |= static_cast<std::uint8_t>(0x80u >> (bit & 7));
    }
}

// k bits starting at stream bit `pos`, most significant first. Reads up to 3 bytes
// from pos/8; the last steps touch the scale bytes, which the mask discards.
inline unsigned get_bits(const std::uint8_t* in, int pos, int k) {
    const int b = pos >> 3;
    const unsigned v = static_cast<unsigned>(in[b]) << 16 | static_cast<unsigned>(in[b + 1]) << 8 | in[b + 2];
    return (v >> (24 - (pos & 7) - k)) & ((1u << k) - 1u);
}

double weighted_error(const float* x, const float* q, const Codebook& cb, const std::uint16_t* windows, float s) {
    double e = 0;
    for (int t = 0; t < kBlockSteps; ++t) {
        const double d0 = x[2 * t] - static_cast<double>(s) * cb.coord0()[windows[t]];
        const double d1 = x[2 * t + 1] - static_cast<double>(s) * cb.coord1()[windows[t]];
        e += q[2 * t] * d0 * d0 + q[2 * t + 1] * d1 * d1;
    }
    return e;
}

}  // namespace

TrellisScratch::TrellisScratch() : best(kBlockSteps * kMaxStates), last(kWindows) {}

void encode_block(const float* x, const float* importance, const Codebook& cb, TrellisScratch& scratch,
                  std::uint8_t* out, const EncodeOptions& options) {
    std::array<float, kBlockWeights> q, y;
    double sum_q = 0, sum_qx2 = 0;
    for (int i = 0; i < kBlockWeights; ++i) {
        if (!std::isfinite(x[i])) throw_format("weight " + std::to_string(i) + " of a block is not finite");
        q[i] = importance ? importance[i] : 1.0f;
        if (!(q[i] >= 0.0f) || !std::isfinite(q[i]))
            throw_format("importance " + std::to_string(i) + " of a block is negative or not finite");
        sum_q += q[i];
        sum_qx2 += static_cast<double>(q[i]) * x[i] * x[i];
    }
    std::memset(out, 0, kBlockBytes);
    if (sum_q <= 0 || sum_qx2 <= 0) return;  // nothing to represent: scale 0 decodes to zeros

    std::array<std::uint16_t, kBlockSteps> trial;
    float scale = bf16_to_float(float_to_bf16(static_cast<float>(std::sqrt(sum_qx2 / sum_q))));
    double best_error = std::numeric_limits<double>::infinity();
    float best_scale = scale;
    for (int pass = 0; pass < std::max(1, options.passes); ++pass) {
        if (!(scale > 0.0f) || !std::isfinite(scale)) break;
        const float inv = 1.0f / scale;
        for (int i = 0; i < kBlockWeights; ++i) y[i] = x[i] * inv;
        viterbi(y.data(), q.data(), cb.coord0(), cb.coord1(), scratch.best.data(), scratch.last.data(), trial.data());
        const double error = weighted_error(x, q.data(), cb, trial.data(), scale);
        if (error < best_error) {
            best_error = error;
            best_scale = scale;
            scratch.windows = trial;
        }
        // Least-squares scale for the entries just chosen, for the next pass.
        double num = 0, den = 0;
        for (int t = 0; t < kBlockSteps; ++t) {
            const float a = cb.coord0()[trial[t]], b = cb.coord1()[trial[t]];
            num += static_cast<double>(q[2 * t]) * x[2 * t] * a + static_cast<double>(q[2 * t + 1]) * x[2 * t + 1] * b;
            den += static_cast<double>(q[2 * t]) * a * a + static_cast<double>(q[2 * t + 1]) * b * b;
        }
        const float refit = den > 0 ? bf16_to_float(float_to_bf16(static_cast<float>(num / den))) : 0.0f;
        if (refit == scale) break;  // the next pass would repeat this one
        scale = refit;
    }
    if (!std::isfinite(best_error)) throw_format("block scale is out of bf16 range");
    for (int t = 0; t < kBlockSteps; ++t) {
        const int k = kStepBits[t % 8];
        put_bits(out, step_end_bit(t), k, scratch.windows[t] & ((1u << k) - 1u));
    }
    const std::uint16_t s = float_to_bf16(best_scale);
    out[kIndexBytes] = static_cast<std::uint8_t>(s);
    out[kIndexBytes + 1] = static_cast<std::uint8_t>(s >> 8);
}

float block_scale(const std::uint8_t* block) {
    return bf16_to_float(static_cast<std::uint16_t>(block[kIndexBytes] | block[kIndexBytes + 1] << 8));
}

void block_windows(const std::uint8_t* block, std::uint16_t* windows) {
    unsigned w = 0;
    int pos = 0;
    for (int t = 0; t < kBlockSteps; ++t) {
        const int k = kStepBits[t % 8];
        w = ((w << k) | get_bits(block, pos, k)) & (kWindows - 1);
        pos += k;
        windows[t] = static_cast<std::uint16_t>(w);
    }
}

void decode_block(const std::uint8_t* block, const Codebook& cb, float* out) {
    const float s = block_scale(block);
    unsigned w = 0;
    int pos = 0;
    for (int t = 0; t < kBlockSteps; ++t) {
        const int k = kStepBits[t % 8];
        w = ((w << k) | get_bits(block, pos, k)) & (kWindows - 1);
        pos += k;
        out[2 * t] = s * cb.coord0()[w];
        out[2 * t + 1] = s * cb.coord1()[w];
    }
}

float dot_block(const std::uint8_t* block, const Codebook& cb, const float* x) {
    const float s = block_scale(block);
    unsigned w = 0;
    int pos = 0;
    float acc = 0.0f;
    for (int t = 0; t < kBlockSteps; ++t) {
        const int k = kStepBits[t % 8];
        w = ((w << k) | get_bits(block, pos, k)) & (kWindows - 1);
        pos += k;
        acc += cb.coord0()[w] * x[2 * t] + cb.coord1()[w] * x[2 * t + 1];
    }
    return s * acc;
}

}  // namespace aff::quant
