// The comparison both forward device tests make (forward_test.cpp: the fixtures and models
// built in memory; container_forward_test.cpp: quantised .aff containers): a GPU model against
// the CPU reference forward on one prompt, run as the given chunks (every position's logits),
// then greedy decode steps fed the CPU's argmax. Rows: the logits' NMSE and max |difference|
// over the positions compared, and how many of them have another argmax.
//
// The prompt comes from a seed fixed by the case's name, so a case sees the same prompt
// whatever ran before it. On the exact path (GEMVs: fp32 sums in other orders, logits within
// about 1e-5) the forward's discrete choices are the one place a correct GPU can differ by more
// than rounding: the router's and the indexer's top-k, and the argmax compared, flip when the
// CPU decided them by less than the GPU's rounding differences, and one flipped expert or entry
// moves the logits by O(0.1). So on the exact path the CPU runs first, recording every choice's
// relative margin (aff::SelectionMargins), and a prompt with a margin under kNearTie anywhere is
// replaced by the next seed's; if every one of kPromptAttempts prompts has a near-tie, the one
// whose first near-tie comes latest is compared on the positions before it (they cannot see
// the tie), and a row requires that to be at least half of them. A real bug moves the logits
// at tie-free positions as well, so it still fails the rows.
#pragma once

#include "device_test.hpp"

#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"

#include <string>
#include <vector>

namespace aff::gpu::test {

// A relative margin this small is within reach of the exact path's rounding: about 1e-6 of a
// score at most (logits differ by at most 4.6e-6, tests/gpu/RESULTS.md), so 1e-4 leaves 100x.
inline constexpr double kNearTie = 1e-4;
inline constexpr int kPromptAttempts = 16;
// A route trace's gate weights on the exact path, |GPU weight - CPU weight| / routed scaling
// factor (route_trace_test, mtp_routes_test). The exact path's logits are within 5e-6 of the
// CPU's (tests/gpu/RESULTS.md); the router's scores are one fp32 GEMV and a sqrt(softplus),
// so 1e-4 is generous and still far below a flipped expert's change.
inline constexpr double kRouteWeightTolerance = 1e-4;

struct ForwardCase {
    std::string family;              // the rows' family: "forward", "container"
    std::string name;                // the model; the rows' text and the prompt's seed start with it
    std::string tag;                 // appended to the split in the rows' text, e.g. " (GEMM)"
    int prompt_len = 0;
    std::vector<int> chunks;         // prefill calls, summing to prompt_len
    int decode_steps = 8;
    double max_nmse = 0.0;           // logits NMSE over the positions compared
    double max_abs = 0.0;            // largest |logit difference|
    double max_mismatch_fraction = 0.0;  // positions whose argmax may differ
    bool exact = true;               // exact path: prompts with near-tied choices are replaced
};

// Adds the rows of one case; gpu was made from cpu.
void compare_forward(const aff::Model& cpu, GpuModel& gpu, const ForwardCase& c, std::vector<Row>& rows);

}  // namespace aff::gpu::test
