// The TQ2875 window decoder (formats/quant-codebook.md §4) as device functions, for kernels
// that decode codebook-stored experts (moe_gemm.hip). It is the decoder moe_gemv.hip carries
// in its own anonymous namespace, written out once more here because that file belongs to the
// decode GEMV work; moe_gemv can switch to this header and drop its copy. Bit-exactness of the
// decoded weights is checked on the device against aff::quant::decode_block
// (tests/gpu/moe_gemm_test.cpp, through the GEMM's dequantised tile).
// Step pair p (steps 2p, 2p+1 = weights 4p .. 4p+3 of a block) has its bits at offsets fixed by
// p alone: the pair's fresh bits end at hi = e_{2p+1}, and the 32 stream bits before hi lie in
// block words j-1, j (j = (hi-1)/32, big-endian bit order) shifted right by 32(j+1) - hi.
#pragma once

#include "kernels/device_common.hpp"

namespace aff::gpu::dev::tq {

inline constexpr int kBlockBytes = 92;  // 256 weights
inline constexpr int kBlockWords = kBlockBytes / 4;
inline constexpr int kEntries = 4096;

__device__ inline uint32_t bswap32(uint32_t u) {
#if defined(AFF_GPU_IS_CUDA)
    return __byte_perm(u, 0u, 0x0123);
#else
    return __builtin_bswap32(u);
#endif
}

struct PairBits {
    int word;        // j
    uint32_t shift;  // 32(j+1) - hi
    uint32_t k1;     // fresh bits of step 2p+1
    uint32_t lo_mask;
};

__device__ inline PairBits pair_bits(int p) {
    const int q = p & 3;
    const int hi = 45 * (p >> 2) + (q == 0 ? 11 : q == 1 ? 23 : q == 2 ? 34 : 45);
    PairBits b;
    b.word = (hi - 1) >> 5;
    b.shift = static_cast<uint32_t>(32 * (b.word + 1) - hi);
    b.k1 = q == 0 ? 5u : 6u;
    b.lo_mask = b.word > 0 ? ~0u : 0u;
    return b;
}

// The two 12-bit windows of a pair from the block's words j-1 (lo) and j (hi), as stored.
__device__ inline void pair_windows(uint32_t lo_stored, uint32_t hi_stored, const PairBits& b, uint32_t& w0,
                                    uint32_t& w1) {
    const uint32_t hi_word = bswap32(hi_stored);
    const uint32_t lo_word = bswap32(lo_stored) & b.lo_mask;
    const uint64_t both = (static_cast<uint64_t>(lo_word) << 32) | hi_word;
    const uint32_t g = static_cast<uint32_t>(both >> b.shift);
    w1 = g & 0xfffu;
    w0 = (g >> b.k1) & 0xfffu;
}

// The block scale: bf16 in bytes 90..91, the high half of word 22; as float.
__device__ inline float block_scale(uint32_t word22) { return bits_to_float(word22 & 0xffff0000u); }

// A codebook entry (c0 in the low half, c1 in the high half) as two floats.
__device__ inline void entry_to_float2(uint32_t u, float& c0, float& c1) {
#if defined(AFF_GPU_IS_CUDA)
    __half2_raw raw;
    raw.x = static_cast<unsigned short>(u & 0xffffu);
    raw.y = static_cast<unsigned short>(u >> 16);
    const float2 f = __half22float2(__half2(raw));
    c0 = f.x;
    c1 = f.y;
#else
    c0 = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<unsigned short>(u & 0xffffu)));
    c1 = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<unsigned short>(u >> 16)));
#endif
}

}  // namespace aff::gpu::dev::tq
