// A popularity profile (formats/expert-profile.md §4, source 2) fitted from real routing:
// each (layer, expert)'s count is the number of token selections of it in the trace, over
// every step and phase (draft steps, the MTP layer's, left out). aff-profile --from-trace
// writes it; the runtime places by it.
#pragma once

#include "libaff/quant/expert_profile.hpp"
#include "libaff/trace/route_trace.hpp"

namespace aff::trace {

quant::ExpertProfile profile_from_trace(const RouteTrace& trace);

}  // namespace aff::trace

namespace aff::trace {

// The counts of `profile` as the initial placement of a replay of a trace with `header`'s
// geometry; throws aff::Error (usage) naming both shapes when they differ.
std::vector<std::uint64_t> placement_counts(const quant::ExpertProfile& profile, const TraceHeader& header);
// The profile embedded in an .aff container (its PROF section); throws aff::Error
// (format) when the container has none.
quant::ExpertProfile container_profile(const std::string& container_path);

}  // namespace aff::trace
