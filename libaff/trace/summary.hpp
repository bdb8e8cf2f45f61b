// What `aff-trace summary` reports about a route trace: steps and tokens, and per layer the
// popularity of its experts (entropy, the busiest tenth's share, experts covering 90 % and
// 99 % of selections) and the consecutive-token overlap, over all tokens and per phase.
// Counts are integers so that the independent reader (tests/oracle/read_route_trace.py)
// can be compared with it exactly.
#pragma once

#include "libaff/trace/route_trace.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <vector>

namespace aff::trace {

struct LayerPopularity {
    std::uint32_t layer = 0;
    bool hash = false;
    std::uint64_t selections = 0;           // token × K entries
    std::uint32_t used = 0;                 // experts selected at least once
    std::uint32_t busiest = 0;              // lowest id among the most selected
    std::uint64_t busiest_count = 0;
    double entropy_bits = 0;                // of the selection distribution
    double top_tenth_share = 0;             // share of the ⌈E/10⌉ busiest experts
    std::uint32_t cover90 = 0, cover99 = 0;  // fewest experts whose selections reach 90 % / 99 %
    // Consecutive tokens of one sequence (each token and the one recorded before it in the
    // same sequence): pairs, and distinct experts the two share, summed.
    std::uint64_t pairs = 0, shared = 0;
    double overlap(std::uint32_t k) const { return pairs ? double(shared) / (double(pairs) * k) : 0.0; }
};

struct PhasePopularity {
    Phase phase = Phase::prefill;
    std::uint64_t tokens = 0;
    std::vector<LayerPopularity> layers;
};

struct TraceSummary {
    TraceHeader header;
    std::uint64_t steps = 0, token_steps = 0, sequences = 0;
    std::vector<LayerPopularity> layers;   // every token
    std::vector<PhasePopularity> phases;   // phases present, in phase order
    std::uint32_t draft_layers = 0;        // most layer blocks of a draft step (MTP 1, DSpark 3)
};

TraceSummary summarize(const RouteTrace& trace);
void write_summary_text(std::ostream& out, const TraceSummary& summary);
nlohmann::json summary_json(const TraceSummary& summary);

}  // namespace aff::trace
