// The warp reduction the GEMV kernels (fp8_gemv, moe_gemv) end with: V partial sums per lane
// (V a power of two up to the warp) become V warp-wide sums with V − 1 + log2(32/V) shuffles
// instead of 5·V, by a reduce-scatter butterfly. Device-side only.
#pragma once

#include "kernels/device_common.hpp"

namespace aff::gpu::dev {

// The least power of two >= v, and log2 of a power of two (the sums' and lanes' counts).
__host__ __device__ constexpr int pow2_at_least(int v) {
    int p = 1;
    while (p < v) p *= 2;
    return p;
}

__host__ __device__ constexpr int log2_of(int v) {
    int l = 0;
    while ((1 << l) < v) ++l;
    return l;
}

// One butterfly step: lanes split on bit `off`, each keeps one half of its kHalf·2 values and
// adds the partner's copy of that half. Recursion keeps every index a compile-time constant
// (a loop here left the array in local memory).
template <int V, int kHalf>
__device__ inline void reduce_scatter_step(float (&v)[V], unsigned lane) {
    if constexpr (kHalf >= 1) {
        constexpr int kOff = kWarp * kHalf / V;
        const bool upper = (lane & static_cast<unsigned>(kOff)) != 0;
#pragma unroll
        for (int i = 0; i < kHalf; ++i) {
            const float send = upper ? v[i] : v[i + kHalf];
            const float keep = upper ? v[i + kHalf] : v[i];
            v[i] = keep + shfl_xor(send, kOff);
        }
        reduce_scatter_step<V, kHalf / 2>(v, lane);
    }
}

// After the call, lane l holds the warp-wide sum of value index l / (32 / V) in v[0].
template <int V>
__device__ inline void warp_reduce_scatter(float (&v)[V]) {
    static_assert(V >= 1 && V <= kWarp && (V & (V - 1)) == 0, "V must be a power of two up to the warp");
    reduce_scatter_step<V, V / 2>(v, lane_id());
#pragma unroll
    for (int off = kWarp / V / 2; off >= 1; off /= 2) v[0] += shfl_xor(v[0], off);
}

}  // namespace aff::gpu::dev
