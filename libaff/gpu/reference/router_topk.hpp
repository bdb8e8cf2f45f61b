// CPU twin of kernels/router_topk.hip (model doc §3.9). See rms_norm.hpp for why twins live
// here.
#pragma once

#include "kernels/router_topk.hpp"

#include <cstdint>

namespace aff::cpu {

// Same contract as aff::gpu::router_topk, host pointers; scores in double.
void router_topk(const float* logits, int tokens, const gpu::RouterConfig& c, const float* bias,
                 const int32_t* tid2eid, const int32_t* token_ids, int32_t* ids, float* weights);

}  // namespace aff::cpu
