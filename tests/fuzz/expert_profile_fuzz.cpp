// libFuzzer target: expert profile files (formats/expert-profile.md) as aff-profile and
// aff-quantize read them. Property: any input parses or throws aff::Error; a parsed
// profile's summaries never claim more activations than its counts sum to, and no
// share exceeds 1.
#include "libaff/core/error.hpp"
#include "libaff/quant/expert_profile.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const aff::quant::ExpertProfile p = aff::quant::ExpertProfile::parse(std::span(data, size), "fuzz.afp");
        std::uint64_t total = 0;
        for (const aff::quant::LayerSummary& s : aff::quant::summarize(p)) {
            if (s.top_share > 1.0 + 1e-9 || s.top_share < 0) std::abort();
            total += s.activations;
        }
        if (total != std::accumulate(p.counts.begin(), p.counts.end(), std::uint64_t{0})) std::abort();
        for (const aff::quant::RankedExpert& r : aff::quant::top_experts(p, 3))
            if (r.share > 1.0 + 1e-9 || r.share < 0) std::abort();
    } catch (const aff::Error&) {
    }
    return 0;
}
