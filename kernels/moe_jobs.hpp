// moe_gemv's job lists built on the device (kernels/moe_gemv.hpp, MoeGemvJob): the forward's
// routed experts are picked by router_topk on the device, and bringing the ids to the host to
// build the lists would stop the decode step there (no graph capture, a sync per layer). One
// launch fills up to kMoeJobListsMax lists (w1, w3, w2 of a layer) from the same ids; the
// lists then feed moe_gemv_device_jobs. Host-callable declarations; device code in moe_jobs.hip.
#pragma once

#include "kernels/moe_gemv.hpp"

#include <cstddef>
#include <cstdint>

namespace aff::gpu {

inline constexpr int kMoeJobListsMax = 3;

// Job j of a list: w = stack + ids[j] · expert_bytes, x = x + (j / x_group) · x_stride,
// y = y + j · y_stride (strides in floats), written to out[j]. When `rotated` is set and
// rotated[ids[j]] is non-zero (a TQ2875R expert, whose input must be H x), the job reads
// x_rotated instead of x, at the same offset. All pointers device memory.
struct MoeJobList {
    const uint8_t* stack = nullptr;
    size_t expert_bytes = 0;
    const float* x = nullptr;
    size_t x_stride = 0;
    int x_group = 1;
    float* y = nullptr;
    size_t y_stride = 0;
    MoeGemvJob* out = nullptr;
    const uint8_t* rotated = nullptr;  // per expert, or null: no expert of the list is rotated
    const float* x_rotated = nullptr;
};

// Fills `lists` (1..kMoeJobListsMax, passed by value) for ids[0 .. count). Ids are the
// router's, in [0, experts): not checked on the device.
void moe_jobs(const int32_t* ids, int count, const MoeJobList* lists, int list_count, void* stream);

}  // namespace aff::gpu
