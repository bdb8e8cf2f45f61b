// The TQ2875 window decoder (formats/quant-codebook.md §4), once, for every kernel that
// decodes codebook-stored experts (moe_gemv.hip, moe_gemm.hip) and for host code: the
// functions are __host__ __device__ and the header needs no GPU compiler, so the CPU suite
// holds them to aff::quant::decode_block bit for bit (tests/unit/gpu/tq2875_decode_test.cpp).
// Two views of a block's 23 words, both with offsets fixed by the position alone:
//   - step pair p (steps 2p, 2p+1 = weights 4p .. 4p+3): the pair's fresh bits end at
//     hi = e_{2p+1}; the 32 stream bits before hi lie in words j-1, j (j = (hi-1)/32,
//     big-endian bit order) shifted right by 32(j+1) - hi (pair_bits, pair_windows: words as
//     stored);
//   - lane l of a warp (steps 4l .. 4l+3 = weights 8l .. 8l+7): all four windows lie in the 29
//     stream bits before e_{4l+3}, in words j-1, j of the byte-swapped block (lane_bits,
//     lane_windows: what moe_gemv parks in its shared-memory stage).
// Word -1 reads as zero (the all-zero start of the window).
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIP__)
#include "kernels/gpu_compat.hpp"
#define AFF_TQ_HD __host__ __device__
#else
#define AFF_TQ_HD
#endif

namespace aff::gpu::dev::tq {

inline constexpr int kBlockBytes = 92;  // 256 weights
inline constexpr int kBlockWords = kBlockBytes / 4;
inline constexpr int kEntries = 4096;

AFF_TQ_HD inline uint32_t bswap32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __byte_perm(u, 0u, 0x0123);
#else
    return __builtin_bswap32(u);
#endif
}

AFF_TQ_HD inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
#endif
}

// (hi:lo) >> shift, low 32 bits (shift < 32).
AFF_TQ_HD inline uint32_t funnel_right(uint32_t lo, uint32_t hi, uint32_t shift) {
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(lo, hi, shift);
#else
    return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> shift);
#endif
}

struct PairBits {
    int word;        // j
    uint32_t shift;  // 32(j+1) - hi
    uint32_t k1;     // fresh bits of step 2p+1
    uint32_t lo_mask;
};

AFF_TQ_HD inline PairBits pair_bits(int p) {
    const int q = p & 3;
    const int hi = 45 * (p >> 2) + (q == 0 ? 11 : q == 1 ? 23 : q == 2 ? 34 : 45);
    PairBits b;
    b.word = (hi - 1) >> 5;
    b.shift = static_cast<uint32_t>(32 * (b.word + 1) - hi);
    b.k1 = q == 0 ? 5u : 6u;
    b.lo_mask = b.word > 0 ? ~0u : 0u;
    return b;
}

// The two 12-bit windows of a pair from the block's words j-1 (lo) and j (hi), as stored
// (word -1: pass any word, lo_mask clears it).
AFF_TQ_HD inline void pair_windows(uint32_t lo_stored, uint32_t hi_stored, const PairBits& b, uint32_t& w0,
                                   uint32_t& w1) {
    const uint32_t hi_word = bswap32(hi_stored);
    const uint32_t lo_word = bswap32(lo_stored) & b.lo_mask;
    const uint64_t both = (static_cast<uint64_t>(lo_word) << 32) | hi_word;
    const uint32_t g = static_cast<uint32_t>(both >> b.shift);
    w1 = g & 0xfffu;
    w0 = (g >> b.k1) & 0xfffu;
}

// Lane l's words: the 32 stream bits ending at hi = e_{4l+3} lie in words j-1, j
// (j = (hi-1)/32) of the byte-swapped block, shifted right by 32(j+1) - hi. Step 4l+3's window
// is the low 12 bits, the others sit k_{4l+3}, k_{4l+3}+k_{4l+2} and 17 bits higher
// (K = 6,5,6,6 | 5,6,5,6 around the octet).
struct LaneBits {
    int word;        // j
    int lo_word;     // max(j - 1, 0)
    uint32_t lo_mask;
    uint32_t shift;
    uint32_t shift1;  // of step 4l+1: 12 (l even) or 11 (l odd)
};

AFF_TQ_HD inline LaneBits lane_bits(int l) {
    const int hi = 45 * (l >> 1) + ((l & 1) ? 45 : 23);
    LaneBits b;
    b.word = (hi - 1) >> 5;
    b.lo_word = b.word > 0 ? b.word - 1 : 0;
    b.lo_mask = b.word > 0 ? ~0u : 0u;
    b.shift = static_cast<uint32_t>(32 * (b.word + 1) - hi);
    b.shift1 = (l & 1) ? 11u : 12u;
    return b;
}

// Lane l's four windows (steps 4l .. 4l+3) from the byte-swapped block's words.
AFF_TQ_HD inline void lane_windows(const uint32_t* swapped, const LaneBits& b, uint32_t& w0, uint32_t& w1,
                                   uint32_t& w2, uint32_t& w3) {
    const uint32_t g = funnel_right(swapped[b.word], swapped[b.lo_word] & b.lo_mask, b.shift);
    w3 = g & 0xfffu;
    w2 = (g >> 6) & 0xfffu;
    w1 = (g >> b.shift1) & 0xfffu;
    w0 = (g >> 17) & 0xfffu;
}

// The block scale: bf16 in bytes 90..91, the high half of word 22 as stored; as float.
AFF_TQ_HD inline float block_scale(uint32_t word22) { return bits_to_float(word22 & 0xffff0000u); }

// The same from the byte-swapped word 22 (bytes 88..91 as b88 b89 b90 b91, most significant
// first): the bf16 is b91:b90, as float bits b91 b90 0 0.
AFF_TQ_HD inline float swapped_scale(uint32_t v) {
#if defined(__CUDA_ARCH__)
    return bits_to_float(__byte_perm(v, 0u, 0x0144));
#else
    return bits_to_float(((v & 0xffu) << 24) | ((v & 0xff00u) << 8));
#endif
}

// An fp16 bit pattern as float (exact: every fp16 value is a float), for host code.
AFF_TQ_HD inline float half_bits_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf, NaN
    if (exp == 0) {
        if (man == 0) return bits_to_float(sign);
        exp = 113;  // normalise the subnormal: value man · 2^-24
        while (!(man & 0x400u)) {
            man <<= 1;
            --exp;
        }
        return bits_to_float(sign | (exp << 23) | ((man & 0x3ffu) << 13));
    }
    return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

// A codebook entry (c0 in the low half, c1 in the high half) as two floats.
AFF_TQ_HD inline void entry_to_float2(uint32_t u, float& c0, float& c1) {
#if defined(__CUDA_ARCH__)
    // Straight from the register's halves (building a __half2 from two shorts cost 2 more ops).
    asm("{.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\tcvt.f32.f16 %0, lo;\n\tcvt.f32.f16 %1, hi;}"
        : "=f"(c0), "=f"(c1)
        : "r"(u));
#elif defined(__HIP_DEVICE_COMPILE__)
    c0 = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<unsigned short>(u & 0xffffu)));
    c1 = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<unsigned short>(u >> 16)));
#else
    c0 = half_bits_to_float(static_cast<uint16_t>(u & 0xffffu));
    c1 = half_bits_to_float(static_cast<uint16_t>(u >> 16));
#endif
}

}  // namespace aff::gpu::dev::tq
