// Rotary embedding on the GPU (model doc §3.3): interleaved pairs (2j, 2j+1) on the trailing
// rotary channels of every vector, angle = position · θ_j in fp32, and the inverse rotation
// that de-rotates the attention output. The θ table (plain or YaRN) is built on the host by
// rope_table (libaff/gpu/reference/rope.cpp) and travels to the kernel by value.
#pragma once

#include <cstdint>

namespace aff {

struct RopeConfig {
    double base = 10000.0;      // rope_theta (10000) or compress_rope_theta (160000)
    int rot_dims = 64;          // Dr: rotated trailing channels, even
    double yarn_factor = 1.0;   // 1 = plain; V4-Flash compress layers: 16
    double original_max_pos = 65536.0;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
};

inline constexpr int kRopeMaxPairs = 64;

struct RopeTable {
    int pairs = 0;                  // rot_dims / 2
    float theta[kRopeMaxPairs] = {};
};

// θ_j = base^(−2j/Dr), blended with θ_j / factor by YaRN's linear ramp between the
// low/high pair indices when yarn_factor != 1 (no magnitude correction). Computed in
// double, rounded once to float. Throws unsupported for rot_dims odd, <= 0 or > 128.
RopeTable rope_table(const RopeConfig& config);

}  // namespace aff

namespace aff::gpu {

// Rotates, in place, the last 2·table.pairs channels of each of the tokens × vecs vectors of
// `dim` floats in x (layout [tokens][vecs][dim]) by position[t] · θ_j; `inverse` rotates by
// the negative angle. positions (int32, one per token) and x are device memory.
void rope(float* x, const int32_t* positions, int tokens, int vecs, int dim, const RopeTable& table,
          bool inverse, void* stream);

// Both sides compute the fp32 angle identically; sin/cos of it differ by an ulp or two.
inline constexpr double rope_max_nmse = 1e-10;

}  // namespace aff::gpu
