// Viterbi encoder and reference decoder of the 92-byte trellis block
// (formats/quant-codebook.md §4). The window of step t is the last 12 bits of the
// block's index stream up to the end of step t's fresh bits, read most significant bit
// first; the search keeps, for every window, the cheapest path that ends in it.
// The hot loop is compiled for AVX-512, AVX2 and the baseline ISA and picked at run
// time; every version does the same float operations in the same order (this file is
// built without floating-point contraction, so no FMA), so the output does not depend
// on the machine. tests/unit/quant/quantize_digest_test.cpp pins the bytes.
#include "libaff/quant/trellis.hpp"

#include "libaff/core/error.hpp"
#include "libaff/quant/half.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace aff::quant {

namespace {

constexpr int kL = Codebook::kWindowBits;
constexpr int kWindows = Codebook::kEntries;
constexpr int kMaxStates = 128;  // 2^(12 - 5)
constexpr float kInf = std::numeric_limits<float>::infinity();

// The search keeps best_t[u] = min over predecessors of the cost of the old window,
// for every u = the low 12-k_t bits the new window inherits (best[t] below). The cost
// of window w at step t is best_t[w >> k_t] + d_t(w). Only best_t is stored; the
// traceback recomputes the few costs it compares, with the same float operations, so
// the forward pass needs no argmin bookkeeping. The distance of window w at a step is
// q₀·(y₀ − c₀[w])² + q₁·(y₁ − c₁[w])², evaluated as (q₀·e₀)·e₀ + (q₁·e₁)·e₁ everywhere.

// Lanes of W floats. Each instruction set's search uses its own register width (SSE2 4,
// AVX2 8, AVX-512 16); the compiler turns every operator into one instruction of that
// width, and a lane does exactly the scalar operations of the distance above in the same order.
// The helpers below take and return such vectors; they are always inlined into one
// search_* function compiled for the matching instruction set, so GCC's warning that
// wide vectors change the calling convention of a plain function does not apply (the
// file is built with -Wno-psabi; a pragma cannot silence it).
typedef float Lanes4 __attribute__((vector_size(16)));
typedef float Lanes8 __attribute__((vector_size(32)));
typedef float Lanes16 __attribute__((vector_size(64)));

template <class V>
[[gnu::always_inline]] inline V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Costs of the W windows starting at w: best[w >> K] + d(w), with flat weights (q = 1,
// where q·e·e is e·e exactly) or per-position ones.
template <class V, bool kFlat, int K>
[[gnu::always_inline]] inline V window_costs(const float* best, int w, const float* c0, const float* c1,
                                             V y0, V y1, V q0, V q1) {
    const V e0 = y0 - load<V>(c0 + w), e1 = y1 - load<V>(c1 + w);
    V d;
    if constexpr (kFlat) d = e0 * e0 + e1 * e1;
    else d = q0 * e0 * e0 + q1 * e1 * e1;
    return best[w >> K] + d;
}

// min(acc, costs of the W windows at w), as cost < acc ? cost : acc: the minimum,
// whatever order the windows come in (costs are never NaN, never −0).
template <class V, bool kFlat, int K>
[[gnu::always_inline]] inline V min_cost(V acc, const float* best, int w, const float* c0, const float* c1,
                                         V y0, V y1, V q0, V q1) {
    const V c = window_costs<V, kFlat, K>(best, w, c0, c1, y0, y1, q0, q1);
    return c < acc ? c : acc;
}

// One step that is not the last: next[l] = min over r of cost(r·N + l) for l < N, where
// N = 2^(12 − k') is the next step's state count; windows r·N + l are exactly those
// whose low bits (what the next window inherits) are l. Lanes of next[] are kept in
// registers while the rows stream past, so the inner loop only loads codebook entries.
template <class V, bool kFlat, int K, int N, std::size_t... I>
[[gnu::always_inline]] inline void fold_step(const float* best, float* next, const float* c0, const float* c1,
                                             V y0, V y1, V q0, V q1, std::index_sequence<I...>) {
    constexpr int W = sizeof(V) / sizeof(float), kRegs = sizeof...(I), kChunk = kRegs * W;
    static_assert(N % kChunk == 0);
    for (int l0 = 0; l0 < N; l0 += kChunk) {
        V acc[kRegs];
        ((acc[I] = V{} + kInf), ...);
        for (int w = l0; w < kWindows; w += N) {
            ((acc[I] = min_cost<V, kFlat, K>(acc[I], best, w + static_cast<int>(I) * W, c0, c1, y0, y1, q0, q1)),
             ...);
        }
        ((std::memcpy(next + l0 + static_cast<int>(I) * W, &acc[I], sizeof(V))), ...);
    }
}

// The traceback's tables: for k fresh bits, codebook entry (h << (12-k)) | u stored at
// [u·2^k + h], so the 2^k windows a state u can come from are contiguous. Four tables of
// kWindows floats: c₀ and c₁ for k = 6, then for k = 5.
constexpr int kTracebackTables = 4;
inline float* aligned64(float* p) {
    return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(p) + 63) & ~std::uintptr_t{63});
}
void fill_traceback_tables(const float* c0, const float* c1, float* out) {
    for (int k = 6, table = 0; k >= 5; --k, table += 2)
        for (int u = 0; u < (1 << (kL - k)); ++u)
            for (int h = 0; h < (1 << k); ++h) {
                out[table * kWindows + (u << k) + h] = c0[(h << (kL - k)) | u];
                out[(table + 1) * kWindows + (u << k) + h] = c1[(h << (kL - k)) | u];
            }
}

// The traceback's step: which of the 2^K windows (h << (12-K)) | u that state u can come
// from is the cheapest, smallest h on ties — the first h whose cost is the minimum, as a
// scan "c < chosen" from h = 0 finds it (a NaN at h = 0 is kept). Costs are those the
// forward pass compared: prev_best[old >> k_prev] + the distance, the same operations in
// the same order (for flat weights q·e·e = e·e). The state the old window leaves for
// step t−1 is old >> k_prev = (h << S) + (u >> k_prev), S = 12 − K − k_prev.
template <class V, int K, int S>
[[gnu::always_inline]] inline int predecessor(const float* prev_best, int u, int prev_k, const float* t0,
                                              const float* t1, float y0, float y1, float q0, float q1) {
    constexpr int W = sizeof(V) / sizeof(float), H = 1 << K;
    alignas(64) float from[H], cost[H];
    const int base = u >> prev_k;
    for (int h = 0; h < H; ++h) from[h] = prev_best[(h << S) + base];
    const V Y0 = V{} + y0, Y1 = V{} + y1, Q0 = V{} + q0, Q1 = V{} + q1;
    V lowest = V{} + kInf;
    for (int h = 0; h < H; h += W) {
        const V e0 = Y0 - load<V>(t0 + u * H + h), e1 = Y1 - load<V>(t1 + u * H + h);
        const V c = load<V>(from + h) + (Q0 * e0 * e0 + Q1 * e1 * e1);
        std::memcpy(cost + h, &c, sizeof c);
        lowest = c < lowest ? c : lowest;
    }
    float m = lowest[0];
    for (int i = 1; i < W; ++i) m = lowest[i] < m ? lowest[i] : m;
    int h = 0;
    if (cost[0] == cost[0])
        while (cost[h] != m) ++h;
    return h;
}

// The search is specialised for the step pattern: the last step has 6 bits, and a 5-bit
// step is always followed by a 6-bit one (its fold has 64 states).
constexpr bool kStepPairs = [] {
    for (int i = 0; i < 8; ++i)
        if (kStepBits[i] == 5 && kStepBits[(i + 1) % 8] != 6) return false;
    return kStepBits[(kBlockSteps - 1) % 8] == 6;
}();
static_assert(kStepPairs);

template <class V, bool kFlat>
[[gnu::always_inline]] inline float search(const float* y, const float* q, const float* c0, const float* c1,
                                           const float* tables, float* best, float* last, std::uint16_t* windows) {
    constexpr int W = sizeof(V) / sizeof(float);
    // Registers of accumulators: 8 (64 lanes for AVX2, 32 for SSE2); AVX-512 holds 4
    // (64 lanes), so a 64-state step is one pass over the rows.
    using Regs = std::make_index_sequence<(W == 16 ? 4 : 8)>;
    float total = kInf;
    // best_0: only the all-zero start window exists, and it is its own u = 0.
    for (int u = 0; u < kMaxStates; ++u) best[u] = kInf;
    best[0] = 0.0f;
    for (int t = 0; t < kBlockSteps; ++t) {
        const float* cur = best + t * kMaxStates;
        const V y0 = V{} + y[2 * t], y1 = V{} + y[2 * t + 1], q0 = V{} + q[2 * t], q1 = V{} + q[2 * t + 1];
        float* next = best + (t + 1) * kMaxStates;
        // (this step's bits, the next step's) is (6, 5), (5, 6) or (6, 6): see kStepPairs.
        if (t + 1 == kBlockSteps) {  // the last step (6 bits): every window's cost, and their minimum
            V lowest = V{} + kInf;
            for (int w = 0; w < kWindows; w += W) {
                const V c = window_costs<V, kFlat, 6>(cur, w, c0, c1, y0, y1, q0, q1);
                std::memcpy(last + w, &c, sizeof c);
                lowest = c < lowest ? c : lowest;
            }
            total = lowest[0];
            for (int i = 1; i < W; ++i) total = lowest[i] < total ? lowest[i] : total;
        } else if (kStepBits[t % 8] == 5) {
            fold_step<V, kFlat, 5, 64>(cur, next, c0, c1, y0, y1, q0, q1, Regs{});
        } else if (kStepBits[(t + 1) % 8] == 6) {
            fold_step<V, kFlat, 6, 64>(cur, next, c0, c1, y0, y1, q0, q1, Regs{});
        } else {
            fold_step<V, kFlat, 6, 128>(cur, next, c0, c1, y0, y1, q0, q1, Regs{});
        }
    }
    // The first window of the lowest cost (ties go to the smallest window), as a scan
    // "last[i] < last[w]" from w = 0 finds it, NaN included (a NaN at 0 keeps w = 0; a
    // NaN cost elsewhere is never chosen and never the minimum).
    int w = 0;
    if (last[0] == last[0])
        while (last[w] != total) ++w;
    total = last[w];
    for (int t = kBlockSteps - 1; t >= 1; --t) {
        windows[t] = static_cast<std::uint16_t>(w);
        const int k = kStepBits[t % 8], u = w >> k, prev_k = kStepBits[(t - 1) % 8];
        const float* prev_best = best + (t - 1) * kMaxStates;
        const float y0 = y[2 * t - 2], y1 = y[2 * t - 1], q0 = q[2 * t - 2], q1 = q[2 * t - 1];
        int h;
        if (k == 5)
            h = predecessor<V, 5, 1>(prev_best, u, prev_k, tables + 2 * kWindows, tables + 3 * kWindows, y0, y1, q0, q1);
        else if (prev_k == 6)
            h = predecessor<V, 6, 0>(prev_best, u, prev_k, tables, tables + kWindows, y0, y1, q0, q1);
        else
            h = predecessor<V, 6, 1>(prev_best, u, prev_k, tables, tables + kWindows, y0, y1, q0, q1);
        w = (h << (kL - k)) | u;
    }
    windows[0] = static_cast<std::uint16_t>(w);
    return total;
}

// What a search reads and writes: targets y (already divided by the scale) and weights q
// of 256 positions, the codebook's coordinates and traceback tables, per-step state
// costs best (kBlockSteps × kMaxStates), the last step's costs (kWindows), the result.
struct SearchArgs {
    const float *y, *q, *c0, *c1, *tables;
    float *best, *last;
    std::uint16_t* windows;
};

template <class V>
[[gnu::always_inline]] inline float search_any(const SearchArgs& a) {
    bool flat = true;
    for (int i = 0; i < kBlockWeights; ++i) flat = flat && a.q[i] == 1.0f;
    return flat ? search<V, true>(a.y, a.q, a.c0, a.c1, a.tables, a.best, a.last, a.windows)
                : search<V, false>(a.y, a.q, a.c0, a.c1, a.tables, a.best, a.last, a.windows);
}

using SearchFn = float (*)(const SearchArgs&);

#if defined(__x86_64__) || defined(__i386__)
[[gnu::target("avx512f")]] float search_avx512(const SearchArgs& a) { return search_any<Lanes16>(a); }
[[gnu::target("avx2")]] float search_avx2(const SearchArgs& a) { return search_any<Lanes8>(a); }
#endif
float search_baseline(const SearchArgs& a) { return search_any<Lanes4>(a); }

SearchFn pick_search() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return search_avx512;
    if (__builtin_cpu_supports("avx2")) return search_avx2;
#endif
    return search_baseline;
}

// Fills a.windows with the cheapest window sequence; returns its cost in units of the
// scaled targets.
float viterbi(const SearchArgs& a) {
    static const SearchFn fn = pick_search();
    return fn(a);
}

// k bits starting at stream bit `pos`, most significant first. Reads up to 3 bytes
// from pos/8; the last steps touch the scale bytes, which the mask discards.
inline unsigned get_bits(const std::uint8_t* in, int pos, int k) {
    const int b = pos >> 3;
    const unsigned v = static_cast<unsigned>(in[b]) << 16 | static_cast<unsigned>(in[b + 1]) << 8 | in[b + 2];
    return (v >> (24 - (pos & 7) - k)) & ((1u << k) - 1u);
}

// Bit offset just past each step's fresh bits (step_end_bit), tabulated for the decoders.
constexpr std::array<std::int16_t, kBlockSteps> kStepEnd = [] {
    std::array<std::int16_t, kBlockSteps> e{};
    for (int t = 0; t < kBlockSteps; ++t) e[t] = static_cast<std::int16_t>(step_end_bit(t));
    return e;
}();

// Step t's window: the 12 stream bits ending at kStepEnd[t], zeros before the stream's start.
// That is what the shift register w = ((w << k) | fresh bits) mod 2^12 holds after step t,
// read without the chain through the steps before, so a decoder's steps run independently.
inline unsigned window_at(const std::uint8_t* in, int t) {
    const int end = kStepEnd[t];
    return end < 12 ? get_bits(in, 0, end) : get_bits(in, end - 12, 12);
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

void encode_begin(const float* x, const float* q, BlockEncoding& st) {
    double sum_q = 0, sum_qx2 = 0;
    for (int i = 0; i < kBlockWeights; ++i) {
        if (!std::isfinite(x[i])) throw_format("weight " + std::to_string(i) + " of a block is not finite");
        if (!(q[i] >= 0.0f) || !std::isfinite(q[i]))
            throw_format("importance " + std::to_string(i) + " of a block is negative or not finite");
        sum_q += q[i];
        sum_qx2 += static_cast<double>(q[i]) * x[i] * x[i];
    }
    st = BlockEncoding{};
    if (sum_q <= 0 || sum_qx2 <= 0) {  // nothing to represent: scale 0 decodes to zeros
        st.zero = true;
        return;
    }
    st.scale = bf16_to_float(float_to_bf16(static_cast<float>(std::sqrt(sum_qx2 / sum_q))));
    st.best_scale = st.scale;
    st.best_error = std::numeric_limits<double>::infinity();
    st.searching = st.scale > 0.0f && std::isfinite(st.scale);
}

void encode_targets(const float* x, const BlockEncoding& st, float* y) {
    const float inv = 1.0f / st.scale;
    for (int i = 0; i < kBlockWeights; ++i) y[i] = x[i] * inv;
}

void encode_searched(const float* x, const float* q, const Codebook& cb, const std::uint16_t* trial,
                     BlockEncoding& st, const EncodeOptions& options) {
    const bool last = st.pass + 1 >= std::max(1, options.passes);
    // The error only decides between passes. A lone pass is always kept: its error is
    // finite (finite weights and position weights, a finite scale, fp16 entries: the sum
    // stays below 10^128 in double), so it beats the initial +inf; not computing it spares
    // the host a third of its work per block.
    const double error = (last && st.pass == 0) ? 0.0 : weighted_error(x, q, cb, trial, st.scale);
    if (error < st.best_error) {
        st.best_error = error;
        st.best_scale = st.scale;
        std::copy_n(trial, kBlockSteps, st.windows.begin());
    }
    ++st.pass;
    if (last) {
        st.searching = false;
        return;
    }
    // Least-squares scale for the entries just chosen, for the next pass.
    double num = 0, den = 0;
    for (int t = 0; t < kBlockSteps; ++t) {
        const float a = cb.coord0()[trial[t]], b = cb.coord1()[trial[t]];
        num += static_cast<double>(q[2 * t]) * x[2 * t] * a + static_cast<double>(q[2 * t + 1]) * x[2 * t + 1] * b;
        den += static_cast<double>(q[2 * t]) * a * a + static_cast<double>(q[2 * t + 1]) * b * b;
    }
    const float refit = den > 0 ? bf16_to_float(float_to_bf16(static_cast<float>(num / den))) : 0.0f;
    if (refit == st.scale) {  // the next pass would repeat this one
        st.searching = false;
        return;
    }
    st.scale = refit;
    st.searching = refit > 0.0f && std::isfinite(refit);
}

void encode_finish(const BlockEncoding& st, std::uint8_t* out) {
    std::memset(out, 0, kBlockBytes);
    if (st.zero) return;
    if (!std::isfinite(st.best_error)) throw_format("block scale is out of bf16 range");
    // The steps' fresh bits follow each other in the stream (step_end_bit), most
    // significant first: append them to an accumulator and write whole bytes.
    std::uint64_t acc = 0;
    int held = 0, byte = 0;
    for (int t = 0; t < kBlockSteps; ++t) {
        const int k = kStepBits[t % 8];
        acc = (acc << k) | (st.windows[t] & ((1u << k) - 1u));
        for (held += k; held >= 8; held -= 8) out[byte++] = static_cast<std::uint8_t>(acc >> (held - 8));
    }
    const std::uint16_t s = float_to_bf16(st.best_scale);
    out[kIndexBytes] = static_cast<std::uint8_t>(s);
    out[kIndexBytes + 1] = static_cast<std::uint8_t>(s >> 8);
}

void search_block(const float* y, const float* q, const Codebook& cb, TrellisScratch& scratch,
                  std::uint16_t* windows) {
    if (scratch.tables_digest != cb.digest() || scratch.tables.empty()) {
        scratch.tables.assign(kTracebackTables * kWindows + 16, 0.0f);
        fill_traceback_tables(cb.coord0(), cb.coord1(), aligned64(scratch.tables.data()));
        scratch.tables_digest = cb.digest();
    }
    viterbi({y, q, cb.coord0(), cb.coord1(), aligned64(scratch.tables.data()), scratch.best.data(),
             scratch.last.data(), windows});
}

void encode_block(const float* x, const float* importance, const Codebook& cb, TrellisScratch& scratch,
                  std::uint8_t* out, const EncodeOptions& options) {
    std::array<float, kBlockWeights> q, y;
    for (int i = 0; i < kBlockWeights; ++i) q[i] = importance ? importance[i] : 1.0f;
    BlockEncoding st;
    encode_begin(x, q.data(), st);
    std::array<std::uint16_t, kBlockSteps> trial;
    while (st.searching) {
        encode_targets(x, st, y.data());
        search_block(y.data(), q.data(), cb, scratch, trial.data());
        encode_searched(x, q.data(), cb, trial.data(), st, options);
    }
    encode_finish(st, out);
}

float block_scale(const std::uint8_t* block) {
    return bf16_to_float(static_cast<std::uint16_t>(block[kIndexBytes] | block[kIndexBytes + 1] << 8));
}

void block_windows(const std::uint8_t* block, std::uint16_t* windows) {
    for (int t = 0; t < kBlockSteps; ++t) windows[t] = static_cast<std::uint16_t>(window_at(block, t));
}

void decode_block(const std::uint8_t* block, const Codebook& cb, float* out) {
    const float s = block_scale(block);
    const float *c0 = cb.coord0(), *c1 = cb.coord1();
    for (int t = 0; t < kBlockSteps; ++t) {
        const unsigned w = window_at(block, t);
        out[2 * t] = s * c0[w];
        out[2 * t + 1] = s * c1[w];
    }
}

float dot_block(const std::uint8_t* block, const Codebook& cb, const float* x, int weights) {
    const float *c0 = cb.coord0(), *c1 = cb.coord1();
    // Steps past `weights` would add c · (+0) = ±0, which leaves the sum as it is: it starts
    // at +0 and a round-to-nearest sum is −0 only when both terms are, so it is never −0.
    const int steps = std::min(kBlockSteps, (std::max(weights, 0) + 1) / 2);
    float acc = 0.0f;
    for (int t = 0; t < steps; ++t) {
        const unsigned w = window_at(block, t);
        acc += c0[w] * x[2 * t] + c1[w] * x[2 * t + 1];
    }
    return block_scale(block) * acc;
}

void dot_block4(const std::uint8_t* const blocks[4], const Codebook& cb, const float* x, int weights, float out[4]) {
    const float *c0 = cb.coord0(), *c1 = cb.coord1();
    const int steps = std::min(kBlockSteps, (std::max(weights, 0) + 1) / 2);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = 0; t < steps; ++t) {
        const float x0 = x[2 * t], x1 = x[2 * t + 1];
        for (int i = 0; i < 4; ++i) {
            const unsigned w = window_at(blocks[i], t);
            acc[i] += c0[w] * x0 + c1[w] * x1;
        }
    }
    for (int i = 0; i < 4; ++i) out[i] = block_scale(blocks[i]) * acc[i];
}

}  // namespace aff::quant
