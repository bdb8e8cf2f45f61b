// Viterbi search kernel of the trellis encoder (declaration and contract in
// trellis_encode.hpp). One thread block of 256 threads searches one 256-weight block.
//
// Why it gives the CPU's windows bit for bit (libaff/quant/trellis.cpp): every cost is
// best[w >> k] + d(w) with d = e₀·e₀ + e₁·e₁ (flat weights) or (q₀·e₀)·e₀ + (q₁·e₁)·e₁,
// e = y − c, each operation rounded on its own (__fadd_rn and friends on NVIDIA, which
// the compiler never fuses; on AMD the pragma below forbids contraction); a state's
// best is the minimum of its windows' costs, NaN ignored, which is the same value in any
// order; the traceback recomputes the candidates' costs the same way and takes the first
// minimum (a NaN first candidate is kept), as the CPU's scan does.
//
// Layout. Window w (12 bits) = j·256 + lane·8 + warp: each thread owns 16 windows (j, its
// codebook pairs kept in registers) whose low 8 bits are its own. The next step's state is
// the window's low 6 or 7 bits, so a thread's 16 windows all feed one state, and the other
// windows of that state sit in lanes 8 or 16 apart: an in-thread minimum and one or two
// shuffles. Each step's state costs (64 or 128 floats) stay in shared memory for the
// traceback: 11,264 floats (44 KiB) per block.
#include "kernels/trellis_encode.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"

#if defined(AFF_GPU_IS_CUDA)
#define AFF_INLINE __forceinline__
#else
#pragma clang fp contract(off)
#define AFF_INLINE inline __attribute__((always_inline))
#endif

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kPer = 16;           // windows per thread
constexpr int kWindows = 4096;
constexpr int kSteps = 128;
constexpr int kPeriodStates = 704;  // Σ states over the 8 steps of a period (64 or 128 each)
constexpr int kHistory = kPeriodStates * kSteps / 8;
constexpr int kBits[8] = {6, 5, 6, 6, 5, 6, 5, 6};  // fresh bits of each step of a period

// Offset of step t's state costs within a period.
constexpr int state_offset(int i) {
    int o = 0;
    for (int s = 0; s < i; ++s) o += 1 << (12 - kBits[s]);
    return o;
}
static_assert(state_offset(8) == kPeriodStates);
template <int I>
constexpr int kOffset = state_offset(I);  // a constant device code can use

#if defined(AFF_GPU_IS_CUDA)
__device__ AFF_INLINE float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ AFF_INLINE float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ AFF_INLINE float mul_rn(float a, float b) { return __fmul_rn(a, b); }
#else
__device__ inline float add_rn(float a, float b) { return a + b; }
__device__ inline float sub_rn(float a, float b) { return a - b; }
__device__ inline float mul_rn(float a, float b) { return a * b; }
#endif

// Two consecutive floats of shared memory (a step's targets or weights), one 8-byte load.
struct alignas(8) Pair {
    float x, y;
};

__device__ AFF_INLINE float infinity() { return dev::bits_to_float(0x7f800000u); }

template <bool kFlat>
__device__ AFF_INLINE float distance(float y0, float y1, float q0, float q1, float c0, float c1) {
    const float e0 = sub_rn(y0, c0), e1 = sub_rn(y1, c1);
    if (kFlat) return add_rn(mul_rn(e0, e0), mul_rn(e1, e1));
    return add_rn(mul_rn(mul_rn(q0, e0), e0), mul_rn(mul_rn(q1, e1), e1));
}

// A cost as an unsigned key that orders like the cost: costs are ≥ +0 or NaN, and a
// non-negative float's bits order as its value. NaN sorts last, except at the first
// candidate, where it sorts first: the CPU keeps a NaN first candidate.
__device__ AFF_INLINE unsigned cost_key(float c, bool first) {
    if (c != c) return first ? 0u : 0xffffffffu;
    return dev::float_to_bits(c);
}

__device__ AFF_INLINE unsigned warp_min(unsigned v) {
#if defined(AFF_GPU_IS_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_min_sync(0xffffffffu, v);
#else
#pragma unroll
    for (int m = kWarp / 2; m > 0; m /= 2) {
        const unsigned o = static_cast<unsigned>(dev::shfl_xor(static_cast<int>(v), m));
        v = o < v ? o : v;
    }
    return v;
#endif
}

// The first lane (lowest index) whose `hit` is true, or kWarp when none.
__device__ AFF_INLINE unsigned first_lane(bool hit) {
#if defined(AFF_GPU_IS_CUDA)
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    return mask ? static_cast<unsigned>(__ffs(mask) - 1) : kWarp;
#else
    return warp_min(hit ? dev::lane_id() : static_cast<unsigned>(kWarp));
#endif
}

// One step that is not the last: next[l] = min over the windows w with low bits l of
// cur[w >> K] + d(w), for the N states of the next step.
template <bool kFlat, int K, int N>
__device__ AFF_INLINE void fold(const float* cur, float* next, const Pair y, const Pair q,
                                     const float (&c0)[kPer], const float (&c1)[kPer], unsigned low,
                                     unsigned lane) {
    const float inf = infinity();
    float acc[4] = {inf, inf, inf, inf};
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const unsigned w = (static_cast<unsigned>(j) << 8) | low;
        const float c = add_rn(cur[w >> K], distance<kFlat>(y.x, y.y, q.x, q.y, c0[j], c1[j]));
        acc[j % 4] = fminf(acc[j % 4], c);
    }
    float m = fminf(fminf(acc[0], acc[1]), fminf(acc[2], acc[3]));
    // The state's other windows differ in window bits log2(N) … 7: lane bits 3 (N = 64) and 4.
    if (N == 64) m = fminf(m, dev::shfl_xor(m, 8));
    m = fminf(m, dev::shfl_xor(m, 16));
    if (lane < N / 8) next[low] = m;
}

// The traceback's step from window w of step t (K fresh bits) to step t − 1 (its state
// costs prev, KP fresh bits): which of the 2^K windows (h << (12 − K)) | (w >> K) step t−1
// ended in. tb0/tb1: the codebook reordered for K (trellis_tables). Every lane returns it.
template <int K, int KP>
__device__ AFF_INLINE unsigned predecessor(unsigned w, const float* prev, const float* tb0, const float* tb1,
                                                Pair y, Pair q, unsigned lane) {
    const unsigned u = w >> K;
    constexpr unsigned S = 12 - K - KP;  // (h << (12-K) | u) >> KP = (h << S) + (u >> KP)
    const unsigned h0 = lane;
    const float c_lo = add_rn(prev[(h0 << S) + (u >> KP)],
                              distance<false>(y.x, y.y, q.x, q.y, tb0[(u << K) + h0], tb1[(u << K) + h0]));
    const unsigned k_lo = cost_key(c_lo, h0 == 0);
    if (K == 5) {
        const unsigned m = warp_min(k_lo);
        return first_lane(k_lo == m);
    }
    const unsigned h1 = lane + 32;
    const float c_hi = add_rn(prev[(h1 << S) + (u >> KP)],
                              distance<false>(y.x, y.y, q.x, q.y, tb0[(u << K) + h1], tb1[(u << K) + h1]));
    const unsigned k_hi = cost_key(c_hi, false);
    const unsigned m = warp_min(k_lo < k_hi ? k_lo : k_hi);
    const unsigned first = first_lane(k_lo == m);
    return first < kWarp ? first : 32 + first_lane(k_hi == m);
}

template <bool kFlat>
__device__ AFF_INLINE void search(const float* __restrict__ tables, float* hist, const float* sy,
                                       const float* sq, unsigned* red, uint16_t* sw) {
    const unsigned tid = dev::thread_x(), lane = tid % kWarp, warp = tid / kWarp;
    const unsigned low = (lane << 3) | warp;
    float c0[kPer], c1[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        c0[j] = tables[(j << 8) | low];
        c1[j] = tables[kWindows + ((j << 8) | low)];
    }
    const Pair* y2 = reinterpret_cast<const Pair*>(sy);
    const Pair* q2 = reinterpret_cast<const Pair*>(sq);
    for (int p = 0; p < kSteps / 8; ++p) {
        float* h = hist + p * kPeriodStates;
        const int t = 8 * p;
        fold<kFlat, 6, 128>(h + kOffset<0>, h + kOffset<1>, y2[t], q2[t], c0, c1, low, lane);
        dev::sync_block();
        fold<kFlat, 5, 64>(h + kOffset<1>, h + kOffset<2>, y2[t + 1], q2[t + 1], c0, c1, low, lane);
        dev::sync_block();
        fold<kFlat, 6, 64>(h + kOffset<2>, h + kOffset<3>, y2[t + 2], q2[t + 2], c0, c1, low, lane);
        dev::sync_block();
        fold<kFlat, 6, 128>(h + kOffset<3>, h + kOffset<4>, y2[t + 3], q2[t + 3], c0, c1, low, lane);
        dev::sync_block();
        fold<kFlat, 5, 64>(h + kOffset<4>, h + kOffset<5>, y2[t + 4], q2[t + 4], c0, c1, low, lane);
        dev::sync_block();
        fold<kFlat, 6, 128>(h + kOffset<5>, h + kOffset<6>, y2[t + 5], q2[t + 5], c0, c1, low, lane);
        dev::sync_block();
        fold<kFlat, 5, 64>(h + kOffset<6>, h + kOffset<7>, y2[t + 6], q2[t + 6], c0, c1, low, lane);
        dev::sync_block();
        if (p + 1 == kSteps / 8) break;
        fold<kFlat, 6, 64>(h + kOffset<7>, h + kPeriodStates, y2[t + 7], q2[t + 7], c0, c1, low, lane);
        dev::sync_block();
    }
    // The last step (6 bits): the cheapest window, the first on ties (a NaN window 0 is kept).
    {
        const float* cur = hist + (kSteps / 8 - 1) * kPeriodStates + kOffset<7>;
        const Pair y = y2[kSteps - 1], q = q2[kSteps - 1];
        // Two passes over the thread's windows (the minimum, then the first window at it),
        // recomputing the costs rather than keeping 16 of them in registers.
        auto key = [&](int j) {
            const unsigned w = (static_cast<unsigned>(j) << 8) | low;
            return cost_key(add_rn(cur[w >> 6], distance<kFlat>(y.x, y.y, q.x, q.y, c0[j], c1[j])), w == 0);
        };
        unsigned m = 0xffffffffu;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const unsigned k = key(j);
            m = k < m ? k : m;
        }
        m = warp_min(m);
        if (lane == 0) red[warp] = m;
        dev::sync_block();
        m = red[0];
        for (int i = 1; i < kThreads / kWarp; ++i) m = red[i] < m ? red[i] : m;
        unsigned first = kWindows;
#pragma unroll
        for (int j = kPer - 1; j >= 0; --j)
            if (key(j) == m) first = (static_cast<unsigned>(j) << 8) | low;
        first = warp_min(first);
        dev::sync_block();  // everyone has read red[]
        if (lane == 0) red[warp] = first;
        dev::sync_block();
    }
    if (warp == 0) {
        unsigned w = red[0];
        for (int i = 1; i < kThreads / kWarp; ++i) w = red[i] < w ? red[i] : w;
        const float* tb6_0 = tables + 2 * kWindows;
        const float* tb6_1 = tables + 3 * kWindows;
        const float* tb5_0 = tables + 4 * kWindows;
        const float* tb5_1 = tables + 5 * kWindows;
        for (int p = kSteps / 8 - 1; p >= 0; --p) {
            const float* h = hist + p * kPeriodStates;
            const int t = 8 * p;
            // step t + i → t + i − 1; the previous step's costs and targets.
            if (lane == 0) sw[t + 7] = static_cast<uint16_t>(w);
            w = (predecessor<6, 5>(w, h + kOffset<6>, tb6_0, tb6_1, y2[t + 6], q2[t + 6], lane) << 6) | (w >> 6);
            if (lane == 0) sw[t + 6] = static_cast<uint16_t>(w);
            w = (predecessor<5, 6>(w, h + kOffset<5>, tb5_0, tb5_1, y2[t + 5], q2[t + 5], lane) << 7) | (w >> 5);
            if (lane == 0) sw[t + 5] = static_cast<uint16_t>(w);
            w = (predecessor<6, 5>(w, h + kOffset<4>, tb6_0, tb6_1, y2[t + 4], q2[t + 4], lane) << 6) | (w >> 6);
            if (lane == 0) sw[t + 4] = static_cast<uint16_t>(w);
            w = (predecessor<5, 6>(w, h + kOffset<3>, tb5_0, tb5_1, y2[t + 3], q2[t + 3], lane) << 7) | (w >> 5);
            if (lane == 0) sw[t + 3] = static_cast<uint16_t>(w);
            w = (predecessor<6, 6>(w, h + kOffset<2>, tb6_0, tb6_1, y2[t + 2], q2[t + 2], lane) << 6) | (w >> 6);
            if (lane == 0) sw[t + 2] = static_cast<uint16_t>(w);
            w = (predecessor<6, 5>(w, h + kOffset<1>, tb6_0, tb6_1, y2[t + 1], q2[t + 1], lane) << 6) | (w >> 6);
            if (lane == 0) sw[t + 1] = static_cast<uint16_t>(w);
            w = (predecessor<5, 6>(w, h + kOffset<0>, tb5_0, tb5_1, y2[t], q2[t], lane) << 7) | (w >> 5);
            if (p == 0) break;
            // step t → t − 1: the previous period's last step (6 bits after 6 bits).
            if (lane == 0) sw[t] = static_cast<uint16_t>(w);
            w = (predecessor<6, 6>(w, h - kPeriodStates + kOffset<7>, tb6_0, tb6_1, y2[t - 1], q2[t - 1], lane)
                 << 6) |
                (w >> 6);
        }
        if (lane == 0) sw[0] = static_cast<uint16_t>(w);
    }
}

// kBlocks: thread blocks a multiprocessor is asked to hold, which caps the registers
// (65536 / (256 · kBlocks)): 2 gives 128 and no spills; 3 gives 80 and some (trellis_encode.hpp).
template <int kBlocks>
__global__ void __launch_bounds__(kThreads, kBlocks)
    trellis_search_kernel(const float* __restrict__ tables, const float* __restrict__ y, const float* __restrict__ q,
                          const uint32_t* __restrict__ q_index, uint16_t* __restrict__ windows) {
    __shared__ float hist[kHistory];
    __shared__ __attribute__((aligned(16))) float sy[256];
    __shared__ __attribute__((aligned(16))) float sq[256];
    __shared__ unsigned red[kThreads / kWarp];
    __shared__ __attribute__((aligned(16))) uint16_t sw[kSteps];
    __shared__ int flat;
    const unsigned tid = dev::thread_x(), block = dev::block_x();
    const float* qb = q + static_cast<size_t>(q_index[block]) * 256;
    sy[tid] = y[static_cast<size_t>(block) * 256 + tid];
    sq[tid] = qb[tid];
    // Step 0 starts from the all-zero window alone: state 0 costs 0, the others are unreachable.
    if (tid < 64) hist[tid] = tid == 0 ? 0.0f : infinity();
    if (tid == 0) flat = 1;
    dev::sync_block();
    if (sq[tid] != 1.0f) flat = 0;  // the CPU's test: every weight exactly 1
    dev::sync_block();
    if (flat) search<true>(tables, hist, sy, sq, red, sw);
    else search<false>(tables, hist, sy, sq, red, sw);
    dev::sync_block();
    if (tid < kSteps / 2)
        reinterpret_cast<uint32_t*>(windows + static_cast<size_t>(block) * kSteps)[tid] =
            reinterpret_cast<const uint32_t*>(sw)[tid];
}

}  // namespace

void trellis_tables(const float* c0, const float* c1, float* out) {
    for (int w = 0; w < kWindows; ++w) out[w] = c0[w], out[kWindows + w] = c1[w];
    for (int k = 6, table = 2; k >= 5; --k, table += 2)
        for (int u = 0; u < (1 << (12 - k)); ++u)
            for (int h = 0; h < (1 << k); ++h) {
                out[table * kWindows + (u << k) + h] = c0[(h << (12 - k)) | u];
                out[(table + 1) * kWindows + (u << k) + h] = c1[(h << (12 - k)) | u];
            }
}

void trellis_search(const float* tables, const float* y, const float* q, const uint32_t* q_index, uint16_t* windows,
                    int blocks, void* stream, int blocks_per_sm) {
    if (blocks < 0) throw_argument("trellis_search", "blocks must be >= 0");
    if (blocks == 0) return;
    const dim3 grid(static_cast<unsigned>(blocks)), threads(kThreads);
    const auto s = static_cast<hipStream_t>(stream);
    if (blocks_per_sm == 3) trellis_search_kernel<3><<<grid, threads, 0, s>>>(tables, y, q, q_index, windows);
    else trellis_search_kernel<2><<<grid, threads, 0, s>>>(tables, y, q, q_index, windows);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
