// Incoherence processing (formats/quant-codebook.md §5): a randomised Hadamard
// transform on a matrix's input dimension. W x = (W Hᵀ)(H x) with H = n^-1/2 · H_n · S,
// S a fixed ±1 diagonal; quantising W Hᵀ instead of W spreads outliers over a row and
// makes every row close to Gaussian. Decoders rotate the activations instead of the
// weights. Needs a power-of-two dimension.
#pragma once

#include <cstddef>

namespace aff::quant {

bool rotation_supported(std::size_t n);
// The fixed sign of input column i (+1 or -1), defined by the spec.
float rotation_sign(std::size_t i);
// v ← H v (orthonormal); used on weight rows (giving rows of W Hᵀ) and on activations.
void rotate(float* v, std::size_t n);
// v ← Hᵀ v, the inverse of rotate.
void unrotate(float* v, std::size_t n);

}  // namespace aff::quant
