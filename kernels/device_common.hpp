// Device code shared by every kernel family: thread and block indices, block barrier, warp
// shuffles and sums, and the FP8 E4M3 / E8M0 decoders. Header-only, device-side only; the
// host-side names live in gpu_compat.hpp. Each helper has one CUDA/ROCm spelling and one
// clang-builtin spelling (the gfx1201 compile check, which has no ROCm headers).
#pragma once

#include "gpu_compat.hpp"

#if defined(AFF_GPU_IS_CUDA)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace aff::gpu::dev {

#if defined(AFF_HIP_BARE)
__device__ inline unsigned thread_x() { return __builtin_amdgcn_workitem_id_x(); }
__device__ inline unsigned block_x() { return __builtin_amdgcn_workgroup_id_x(); }
__device__ inline unsigned block_y() { return __builtin_amdgcn_workgroup_id_y(); }
__device__ inline void sync_block() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__device__ inline unsigned lane_id() { return __builtin_amdgcn_mbcnt_lo(~0u, 0u); }
__device__ inline void sync_warp() { __builtin_amdgcn_wave_barrier(); }
__device__ inline float shfl_xor(float v, int mask) {
    const int src = static_cast<int>(lane_id() ^ static_cast<unsigned>(mask));
    return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src << 2, __builtin_bit_cast(int, v)));
}
__device__ inline int shfl_xor(int v, int mask) {
    const int src = static_cast<int>(lane_id() ^ static_cast<unsigned>(mask));
    return __builtin_amdgcn_ds_bpermute(src << 2, v);
}
__device__ inline float shfl(float v, int src) {
    return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src << 2, __builtin_bit_cast(int, v)));
}
__device__ inline float bits_to_float(uint32_t u) { return __builtin_bit_cast(float, u); }
__device__ inline uint32_t float_to_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
#else
__device__ inline unsigned thread_x() { return threadIdx.x; }
__device__ inline unsigned block_x() { return blockIdx.x; }
__device__ inline unsigned block_y() { return blockIdx.y; }
__device__ inline void sync_block() { __syncthreads(); }
__device__ inline unsigned lane_id() { return threadIdx.x % kWarp; }
#if defined(AFF_GPU_IS_CUDA)
__device__ inline void sync_warp() { __syncwarp(); }
__device__ inline float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
__device__ inline int shfl_xor(int v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
__device__ inline float shfl(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }
__device__ inline float bits_to_float(uint32_t u) { return __uint_as_float(u); }
__device__ inline uint32_t float_to_bits(float f) { return __float_as_uint(f); }
#else
__device__ inline void sync_warp() { __builtin_amdgcn_wave_barrier(); }
__device__ inline float shfl_xor(float v, int mask) { return __shfl_xor(v, mask, kWarp); }
__device__ inline int shfl_xor(int v, int mask) { return __shfl_xor(v, mask, kWarp); }
__device__ inline float shfl(float v, int src) { return __shfl(v, src, kWarp); }
__device__ inline float bits_to_float(uint32_t u) { return __uint_as_float(u); }
__device__ inline uint32_t float_to_bits(float f) { return __float_as_uint(f); }
#endif
#endif

// Programmatic dependent launch (NVIDIA sm_90+): launch_dependents lets the next kernel in
// the stream start; wait_prerequisites blocks until the previous kernel has finished and its
// writes are visible. Both are no-ops for a plain launch and on other targets.
// The rule for a kernel launched with the programmatic-serialization attribute: every thread
// path passes wait_prerequisites before it reads anything an earlier kernel writes, before any
// global write, and before it exits (a grid that may finish before its predecessor would let
// the kernel after it, waiting only on this one, read unfinished data). Before the wait it may
// read only what no recent kernel writes (weights, scales, codebooks) and write shared memory.
// Audited 2026-11-29 (fp8_gemv, bf16_gemv, moe_gemv and the since removed moe_gemv_sym: they
// comply; the only kernels launched so; tests/bench/RESULTS.md).
__device__ inline void launch_dependents() {
#if defined(AFF_GPU_IS_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ inline void wait_prerequisites() {
#if defined(AFF_GPU_IS_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Read-only loads. weights: streamed once, kept out of L1 so activations stay there.
#if defined(AFF_GPU_IS_CUDA)
__device__ inline float4 ldg(const float4* p) { return __ldg(p); }
__device__ inline uint4 load_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
#else
__device__ inline float4 ldg(const float4* p) { return *p; }
__device__ inline uint4 load_stream(const uint4* p) { return *p; }
#endif

// Relaxed atomic add on shared or global memory; returns the old value.
__device__ inline unsigned atomic_add(unsigned* p, unsigned v) {
#if defined(AFF_HIP_BARE)
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#else
    return atomicAdd(p, v);
#endif
}

__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int m = kWarp / 2; m > 0; m /= 2) v += shfl_xor(v, m);
    return v;
}

// Element i of a kernel argument's array, by value: the unrolled constant indices keep the
// array in parameter space (a dynamic index would copy it to local memory).
template <class T, int N>
__device__ inline T pick(const T (&list)[N], int i) {
    T v = list[0];
#pragma unroll
    for (int k = 1; k < N; ++k)
        if (i == k) v = list[k];
    return v;
}

// Sum over a block of kThreads threads; every thread gets the total. `scratch` holds
// kThreads / kWarp floats of shared memory; the barrier at the end makes it reusable.
template <int kThreads>
__device__ inline float block_sum(float v, float* scratch) {
    static_assert(kThreads % kWarp == 0 && kThreads / kWarp <= kWarp, "block size");
    v = warp_sum(v);
    const unsigned warp = thread_x() / kWarp;
    if (lane_id() == 0) scratch[warp] = v;
    sync_block();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / kWarp; ++w) total += scratch[w];
    sync_block();
    return total;
}

// E8M0 scale byte: 2^(b - 127); 0 is 2^-127 (a float subnormal), 255 is NaN.
__device__ inline float e8m0_to_float(uint32_t b) {
    if (b == 0) return bits_to_float(0x00400000u);
    if (b == 255) return bits_to_float(0x7fc00000u);
    return bits_to_float(b << 23);
}

// Two FP8 E4M3 ("fn": bias 7, no infinities) values, low byte first. On sm_89+ one hardware
// conversion to two halves; elsewhere the byte's bits are placed in a float's exponent and
// mantissa (exact for normals and subnormals) and rescaled by 2^120, the bias difference;
// that path reads the NaN codes 0x7f/0xff as ±480 (checkpoints hold no NaN weights).
__device__ inline void e4m3x2_to_float2(uint32_t two, float& lo, float& hi) {
#if defined(AFF_GPU_IS_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
    const float2 f = __half22float2(__half2(raw));
    lo = f.x;
    hi = f.y;
#else
    const uint32_t b0 = two & 0xffu, b1 = (two >> 8) & 0xffu;
    lo = bits_to_float(((b0 & 0x80u) << 24) | ((b0 & 0x7fu) << 20)) * 0x1p120f;
    hi = bits_to_float(((b1 & 0x80u) << 24) | ((b1 & 0x7fu) << 20)) * 0x1p120f;
#endif
}

}  // namespace aff::gpu::dev
