// CPU twin of kernels/hc.hip (mHC pre, expand, hyper head; model doc §3.2), computed in
// double. See rms_norm.hpp for why twins live here.
#pragma once

#include "kernels/hc.hpp"

namespace aff::cpu {

// Same contracts as aff::gpu::hc_pre / hc_post / hc_head, host pointers; HcWeights hold host
// pointers here. No scratch is needed on the CPU.
void hc_pre(const float* x, int tokens, const gpu::HcWeights& w, const gpu::HcConfig& c, float* post, float* comb,
            float* u);
void hc_post(float* x, const float* f, const float* post, const float* comb, int tokens, int dim,
             int streams = gpu::kHcStreams);
void hc_head(const float* x, int tokens, const gpu::HcWeights& w, const gpu::HcConfig& c, float* y);

}  // namespace aff::cpu
