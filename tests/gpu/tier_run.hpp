// What the expert-tier device tests share (tiers_test.cpp, ssd_tier_test.cpp; mtp_test.cpp and
// mtp_routes_test.cpp cap their slabs by the slot size too): each holds a tiered model's logits
// to the all-resident model's over a script of chunks and greedy decode steps whose tokens the
// reference run picks, and so repeated the steps, their timing, the bit-for-bit comparison of
// two runs and the size of a tier slot. Each test keeps its own script (the calls differ).
#pragma once

#include "device_test.hpp"

#include "libaff/gpu/forward.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace aff::gpu::test {

// One run of a script: every call's logits in order, and the decode steps' time.
struct TierRun {
    std::vector<std::vector<float>> logits;
    double step_total_ms = 0;  // summed over the decode steps
    int steps = 0;
    double step_ms() const { return steps > 0 ? step_total_ms / steps : 0.0; }  // mean a step
};

// Decode step i of a script on st: the reference run (reference true) first appends to `steps`
// the argmax of the last logits (greedy), the others feed the reference's token. The step's
// logits go into r, its time into r's step figures.
inline void tier_step(GpuModel& g, GpuDecodeState& st, std::vector<std::int32_t>& steps, int i, bool reference,
                      TierRun& r) {
    if (reference) steps.push_back(argmax_last(r.logits.back(), g.config().vocab_size));
    const std::int32_t one[1] = {steps[std::size_t(i)]};
    const auto t0 = std::chrono::steady_clock::now();
    r.logits.push_back(g.forward(st, one, false));
    r.step_total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++r.steps;
}

// Floats whose bits differ between two runs' logits (a call's each), plus 1 when they made a
// different number of calls.
inline long long differ(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
    long long d = got.size() == want.size() ? 0 : 1;
    for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) d += differing(got[i], want[i]);
    return d;
}
inline long long differ(const TierRun& got, const TierRun& want) { return differ(got.logits, want.logits); }

// The bytes of one slab or pool slot: an expert's extent rounded up to 256 (the slab caps of
// the tests' configurations are counted in these).
inline std::size_t tier_slot_bytes(const GpuModel& g) { return (g.expert_extent(0, 0).bytes + 255) / 256 * 256; }

}  // namespace aff::gpu::test
