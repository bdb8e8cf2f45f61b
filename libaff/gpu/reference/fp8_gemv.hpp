// CPU twin of kernels/fp8_gemv.hip, and the scalar FP8 E4M3 / E8M0 decoders it is built on
// (model doc §2.1). See rms_norm.hpp for why twins live here; the checkpoint reader's own
// decoders (libaff/checkpoint) should be unified with these.
#pragma once

#include <cstdint>

namespace aff::cpu {

// E4M3 "fn": bias 7, max finite 448, 0x7f/0xff NaN, no infinities.
float e4m3_to_float(uint8_t b);
// E8M0: 2^(b − 127); 255 is NaN.
float e8m0_to_float(uint8_t b);

// Same contract as aff::gpu::fp8_gemv, host pointers; sums in double.
void fp8_gemv(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int batch, float* y);

}  // namespace aff::cpu
