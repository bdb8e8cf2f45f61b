// profile_from_trace of profile_from_trace.hpp.
#include "libaff/trace/profile_from_trace.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"

namespace aff::trace {

quant::ExpertProfile profile_from_trace(const RouteTrace& t) {
    const TraceHeader& h = t.header;
    quant::ExpertProfile p;
    p.layers = h.layers;
    p.experts = h.experts;
    p.source = quant::ProfileSource::route_trace;
    p.counts.assign(std::size_t(h.layers) * h.experts, 0);
    for (const TraceStep& s : t.steps)
        for (std::size_t b = 0; b < s.layers.size() && !s.draft(); ++b)  // the draft layer is not the profile's
            for (std::size_t i = 0; i < s.n(); ++i)
                for (std::uint16_t e : s.selection(b, i, h.top_k)) ++p.counts[std::size_t(s.layers[b]) * h.experts + e];
    return p;
}

}  // namespace aff::trace

namespace aff::trace {

std::vector<std::uint64_t> placement_counts(const quant::ExpertProfile& p, const TraceHeader& h) {
    if (p.layers != h.layers || p.experts != h.experts)
        throw_usage("the profile is for " + std::to_string(p.layers) + " layers x " + std::to_string(p.experts) +
                    " experts, the trace's model has " + std::to_string(h.layers) + " x " + std::to_string(h.experts));
    return p.counts;
}

quant::ExpertProfile container_profile(const std::string& path) {
    const Container c = Container::open(path);
    const auto bytes = c.expert_profile();
    if (!bytes) throw_format("the container has no expert profile (PROF section)", path);
    return quant::ExpertProfile::parse(*bytes, path + ": profile");
}

}  // namespace aff::trace
