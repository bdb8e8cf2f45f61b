// CPU twin of kernels/rope.hip (see rms_norm.hpp for why twins live here). The θ table
// builder aff::rope_table, declared in kernels/rope.hpp, is implemented in rope.cpp beside it:
// one table for both sides.
#pragma once

#include "kernels/rope.hpp"

#include <cstdint>

namespace aff::cpu {

// Same contract as aff::gpu::rope, host pointers.
void rope(float* x, const int32_t* positions, int tokens, int vecs, int dim, const RopeTable& table, bool inverse);

}  // namespace aff::cpu
