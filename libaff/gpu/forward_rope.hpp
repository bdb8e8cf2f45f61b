// The GPU forward's door to kernels/rope.hpp: it fills the kernel's θ table with the CPU
// reference's own inverse frequencies (aff::rope_inv_freq of the config's RopeParameters)
// rather than the kernel side's rope_table, so both sides rotate by the same fp32 angles.
#pragma once

#include <cstdint>
#include <vector>

namespace aff::gpu {

// kernels/rope.hpp's rope() with θ_j = inv_freq[j] (inv_freq.size() pairs on the trailing
// channels of each of tokens × vecs vectors of dim floats); device pointers.
void rope_with_inv_freq(float* x, const std::int32_t* positions, int tokens, int vecs, int dim,
                        const std::vector<float>& inv_freq, bool inverse, void* stream);

// kernels/rms_norm.hpp's rms_norm_rope (the norm, then the forward rotation, one launch) with
// the same θ table: bit for bit rms_norm followed by rope_with_inv_freq.
void rms_norm_rope_with_inv_freq(const float* x, const float* w, float* y, int tokens, int vecs, int dim, float eps,
                                 const std::int32_t* positions, const std::vector<float>& inv_freq, void* stream);

}  // namespace aff::gpu
