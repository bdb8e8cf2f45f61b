// Where a sequence's routed experts live, for the live view (Sequence::expert_tiers): the
// tiers' counters (tier_stats.hpp: hits per tier, bytes over PCIe and from SSD, tokens,
// moves, experts in each tier), with why the experts are tiered, the mover's strategy, and
// the tier of every (layer, expert). The live view's Tiers panel and expert plane read it.
// A backend that keeps every expert in one place (the CPU reference in host memory, the GPU
// forward with all experts in its weight arena) reports tiered = false and no map; the
// counters are totals since the model loaded, the view turns them into rates.
#pragma once

#include "libaff/placement/tiers.hpp"
#include "libaff/runtime/tier_stats.hpp"

#include <string>
#include <vector>

namespace aff {

struct ExpertTierSnapshot {
    bool tiered = false;
    std::string why;       // why tiered, or why not (one phrase, for the view)
    std::string strategy;  // the mover's placement strategy ("heat", "static", ...)
    TierStats counters;
    // Whether the backend has an SSD tier at all (none does yet: SSD reads stay 0).
    bool has_ssd_tier = false;
    // Routed expert calls computed on the CPU rather than the GPU, of all routed expert
    // calls; no backend computes experts on the CPU yet, so 0 wherever tiered.
    double cpu_expert_share = 0;
    // The tier of expert e of layer l at [l * experts + e]; empty when not tiered.
    int layers = 0, experts = 0;
    std::vector<placement::Tier> where;
};

}  // namespace aff
