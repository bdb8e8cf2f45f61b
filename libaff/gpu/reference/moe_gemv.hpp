// CPU twin of kernels/moe_gemv.hip: one expert's y = Ŵ x for TQ2875 weights, built on the
// format's reference decoder (aff::quant::decode_block), so the kernel is checked against
// the decoder every other TQ2875 reader must match bit for bit. See rms_norm.hpp for why
// twins live here.
#pragma once

#include "libaff/quant/codebook.hpp"

#include <cstdint>

namespace aff::cpu {

// Same contract as one aff::gpu::MoeGemvJob (w: n rows of k/256 92-byte blocks, x [batch][k],
// y [batch][n]), host pointers; dequantises each block and sums in double.
void moe_gemv(const uint8_t* w, int n, int k, const aff::quant::Codebook& codebook, const float* x, int batch,
              float* y);

}  // namespace aff::cpu
