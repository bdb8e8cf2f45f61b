// The decode prefetch's copy by the copy engine (issue 17; libaff/gpu/forward_prefetch.cpp).
// expert_stage's copy kernel moves a predicted pooled expert into HBM with SM loads over the
// bus, and those loads in flight slowed the attention kernels running beside it (batch 1:
// 1.14 x a step's time at 16 blocks; a DMA copy of the same bytes 1.03 x at a higher rate:
// tests/bench/copy_interference_bench.cpp). A DMA copy needs its source address when the graph
// is captured, and which expert to copy is known only on the device: so a captured decode step
// holds, per prefetch slot, a switch node whose body e copies expert e from where it was at
// capture (Stream::capture_switch_copies), and copy_switch_select sets each switch from the
// pick (expert_stage_pick's slot_expert) where the expert is still there (its table entry
// equals the capture's snapshot: the mover may have moved it since); those slots' slot_source
// entries are cleared so that expert_stage_copy skips them, and the rest are copied by the
// kernel as before. Same bytes either way: the logits do not change. Switch nodes are CUDA's
// (12.8 and later): on HIP copy_switch_available() is false and nothing here is called.
// Host-callable declarations only; device code in copy_switch.hip.
#pragma once

#include <cstdint>

namespace aff::gpu {

inline constexpr int kCopySwitchMaxSlots = 8;

struct CopySwitchSelect {
    const std::int32_t* slot_expert = nullptr;   // [slots] (device): expert_stage_pick's, -1 none
    const std::uint8_t** slot_source = nullptr;  // [slots] (device): the kernel copy's sources; cleared where the engine copies
    const std::uint8_t* const* snapshot = nullptr;  // [experts] (device): the address switch body e copies from, null none
    std::uint64_t handles[kCopySwitchMaxSlots] = {};  // one switch a slot (Stream::capture_switch)
    int slots = 0;                                   // 1 .. kCopySwitchMaxSlots
    unsigned none = 0;                               // the value that runs no body (the layer's expert count)
    std::uint32_t* counter = nullptr;                // device, added to: slots handed to the copy engine; null none
};

// Whether this build has switch nodes (CUDA) and so copy_switch_select.
bool copy_switch_available();

// One launch on `stream`, inside the captured graph that holds the switches: sets each slot's
// switch to its expert or to `none` (see above).
void copy_switch_select(const CopySwitchSelect& a, void* stream);

}  // namespace aff::gpu
