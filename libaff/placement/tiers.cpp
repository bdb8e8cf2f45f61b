// Slots from byte capacities and the initial placement by profile (tiers.hpp).
#include "libaff/placement/tiers.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <numeric>

namespace aff::placement {

const char* to_string(Tier tier) {
    switch (tier) {
        case Tier::gpu: return "gpu";
        case Tier::host: return "host";
        case Tier::ssd: return "ssd";
    }
    return "?";
}

Slots slots_for(const Geometry& g, const Capacity& c) {
    if (g.expert_bytes == 0) throw_usage("the expert size is unknown (the trace records none): give --expert-bytes");
    const std::uint64_t keys = g.keys();
    Slots s;
    s.gpu = static_cast<std::uint32_t>(std::min<std::uint64_t>(keys, c.gpu_bytes / g.expert_bytes));
    s.host = static_cast<std::uint32_t>(std::min<std::uint64_t>(keys - s.gpu, c.host_bytes / g.expert_bytes));
    return s;
}

std::vector<ExpertKey> profile_order(const Geometry& g, std::span<const std::uint64_t> counts) {
    if (!counts.empty() && counts.size() != g.keys())
        throw_usage("the profile has " + std::to_string(counts.size()) + " experts, the trace's model " +
                    std::to_string(g.keys()));
    std::vector<ExpertKey> order(g.keys());
    std::iota(order.begin(), order.end(), 0u);
    if (!counts.empty())
        std::stable_sort(order.begin(), order.end(), [&](ExpertKey a, ExpertKey b) { return counts[a] > counts[b]; });
    return order;
}

std::vector<Tier> initial_tiers(const Geometry& g, const Slots& s, std::span<const ExpertKey> order) {
    std::vector<Tier> tiers(g.keys(), Tier::ssd);
    for (std::size_t i = 0; i < order.size() && i < std::size_t(s.gpu) + s.host; ++i)
        tiers[order[i]] = i < s.gpu ? Tier::gpu : Tier::host;
    return tiers;
}

}  // namespace aff::placement
