// The elementwise steps of the MoE block on the GPU (model doc §3.9): the clamped SwiGLU of the
// routed and shared experts, and the weighted sum of a token's expert outputs plus its shared
// expert. The matrix products around them are dense_gemv, fp8_gemv or moe_gemv.
// Host-callable declarations only; device code in swiglu.hip, CPU twin in
// libaff/gpu/reference/swiglu.cpp.
#pragma once

namespace aff::gpu {

// out[i] = silu(min(gate[i], limit)) · clamp(up[i], −limit, limit) for i < count
// (swiglu_limit; pass INFINITY for no clamp). out may alias gate or up.
void swiglu(const float* gate, const float* up, long long count, float limit, float* out, void* stream);

// out[t][d] = Σ_j weights[t·k + j] · routed[t·k + j][d]  (+ shared[t][d] when shared is not
// null), summed in j order then the shared term, as the CPU reference does.
void moe_combine(const float* routed, const float* weights, int tokens, int k, int dim, const float* shared,
                 float* out, void* stream);

// expf against std::exp: an ulp or two per element.
inline constexpr double swiglu_max_nmse = 1e-12;

}  // namespace aff::gpu
