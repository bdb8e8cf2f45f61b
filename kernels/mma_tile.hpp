// Tensor-core tile multiply shared by the prefill GEMMs (fp8_gemm.hip, moe_gemm.hip): bf16
// packing and one warp's 16×16 k-step over bf16 tiles in shared memory. Header-only,
// device-side only. Tiles are row-major with k contiguous: A [m][lda] (activations, one row a
// token) and B [n][ldb] (weights, one row an output feature), so C[m][n] = Σ_k A[m][k]·B[n][k].
// NVIDIA sm_80+: ldmatrix + mma.sync m16n8k16 (bf16 in, fp32 accumulate). Elsewhere (AMD,
// the gfx1201 compile check; older NVIDIA) each lane computes the same four outputs of each
// fragment with scalar fp32 FMAs from the same tiles: correct, not fast (an RDNA4 WMMA path
// would replace it). Accumulator layout of fragment (mt, nt), lane l, g = l / 4, t = l % 4:
// c[0], c[1] at row 16·mt + g, columns 8·nt + 2t, 2t+1; c[2], c[3] at row 16·mt + g + 8.
#pragma once

#include "kernels/device_common.hpp"

#if defined(AFF_GPU_IS_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define AFF_MMA_SYNC 1
#endif

namespace aff::gpu::dev {

// float → bf16 bits, round to nearest even (finite inputs; NaN is not expected here).
__device__ inline uint32_t bf16_bits(float f) {
    const uint32_t u = float_to_bits(f);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ inline uint32_t pack_bf16x2(float lo, float hi) { return bf16_bits(lo) | (bf16_bits(hi) << 16); }
__device__ inline float bf16_to_float(uint32_t h) { return bits_to_float(h << 16); }

// The padding every tile row gets (in bf16 elements): rows 16 bytes apart modulo 128 so the
// eight rows one ldmatrix phase reads fall in different banks.
inline constexpr int kTilePad = 8;

// acc[mt][nt] += A[m0 + 16mt .. +16][k0 .. k0+16] · B[n0 + 8nt .. +8][k0 .. k0+16]ᵀ for one
// warp. NT must be even (ldmatrix.x4 loads two n fragments). lda, ldb in bf16 elements,
// multiples of 8; k0 a multiple of 16.
template <int MT, int NT>
__device__ inline void warp_mma_k16(const uint16_t* As, int lda, int m0, const uint16_t* Bs, int ldb, int n0, int k0,
                                    float (&acc)[MT][NT][4]) {
    static_assert(NT % 2 == 0, "NT must be even");
    const unsigned lane = lane_id();
#if defined(AFF_MMA_SYNC)
    uint32_t a[MT][4], b[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        // Lanes 0-15 address rows 0-15 at k0, lanes 16-31 the same rows at k0 + 8.
        const uint16_t* p = As + (m0 + 16 * mt + (lane & 15)) * lda + k0 + (lane >> 4) * 8;
        const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a[mt][0]), "=r"(a[mt][1]), "=r"(a[mt][2]), "=r"(a[mt][3])
                     : "r"(addr));
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
        // Matrix i = lane / 8: n rows 8·(i / 2) .. +8 of the pair, k half i % 2.
        const unsigned i = lane >> 3;
        const uint16_t* p = Bs + (n0 + 16 * np + (lane & 7) + 8 * (i >> 1)) * ldb + k0 + 8 * (i & 1);
        const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(b[2 * np][0]), "=r"(b[2 * np][1]), "=r"(b[2 * np + 1][0]), "=r"(b[2 * np + 1][1])
                     : "r"(addr));
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                "{%0, %1, %2, %3};"
                : "+f"(acc[mt][nt][0]), "+f"(acc[mt][nt][1]), "+f"(acc[mt][nt][2]), "+f"(acc[mt][nt][3])
                : "r"(a[mt][0]), "r"(a[mt][1]), "r"(a[mt][2]), "r"(a[mt][3]), "r"(b[nt][0]), "r"(b[nt][1]));
#else
    const int g = static_cast<int>(lane >> 2), t = static_cast<int>(lane & 3);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const uint16_t* ar = As + (m0 + 16 * mt + g + 8 * (c >> 1)) * lda + k0;
                const uint16_t* br = Bs + (n0 + 8 * nt + 2 * t + (c & 1)) * ldb + k0;
                float sum = acc[mt][nt][c];
                for (int kk = 0; kk < 16; ++kk) sum += bf16_to_float(ar[kk]) * bf16_to_float(br[kk]);
                acc[mt][nt][c] = sum;
            }
#endif
}

}  // namespace aff::gpu::dev
