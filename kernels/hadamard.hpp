// The randomised Hadamard rotation on the GPU (formats/quant-codebook.md §5): TQ2875R
// matrices are stored as W Hᵀ, so their input must become H x before the codebook GEMV
// (moe_gemv). Host-callable declaration only; device code in hadamard.hip; the CPU twin is
// libaff/quant/rotation (quant::rotate), whose operation order this kernel follows.
#pragma once

namespace aff::gpu {

// Largest vector length the kernel takes (one block holds a vector in shared memory).
inline constexpr int kHadamardMaxN = 8192;

// y[b] = n^-1/2 · H_n · S · x[b] for `batch` vectors of n floats (rows ldx and ldy floats
// apart), S the spec's ±1 signs (splitmix64 of the column index, computed on the device).
// n must be a power of two, 2 <= n <= kHadamardMaxN. x and y may be the same buffer (then
// ldx == ldy). All pointers are device memory.
void hadamard_rotate(const float* x, int ldx, float* y, int ldy, int n, int batch, void* stream);

// Largest ‖gpu − cpu‖² / ‖cpu‖² accepted by tests/gpu: the same fp32 butterflies in the same
// order and the same final scale as quant::rotate, so the results are expected bit for bit;
// the bound leaves room only for a compiler that reorders nothing but still rounds once
// differently.
inline constexpr double hadamard_max_nmse = 1e-12;

}  // namespace aff::gpu
