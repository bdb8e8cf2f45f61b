// The placement engine of engine.hpp: serving a dispatch and applying admissions.
#include "libaff/placement/engine.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <string>

namespace aff::placement {

PlacementEngine::PlacementEngine(Geometry geometry, Slots slots, std::span<const ExpertKey> order, Policy& policy,
                                 std::span<const std::uint64_t> first_use)
    : geometry_(std::move(geometry)), slots_(slots), policy_(policy) {
    if (policy.needs_future() && first_use.size() != geometry_.keys())
        throw_internal(std::string(policy.name()) + " policy needs every expert's first use");
    tiers_ = initial_tiers(geometry_, slots_, order);
    for (Tier t : tiers_) {
        gpu_used_ += t == Tier::gpu;
        host_used_ += t == Tier::host;
    }
    policy_.start(geometry_, tiers_, slots_.gpu, first_use);
}

void PlacementEngine::dispatch(Dispatch d) {
    const std::uint64_t bytes = geometry_.expert_bytes;
    scratch_tiers_.resize(d.experts.size());
    ++counters_.dispatches;
    for (std::size_t i = 0; i < d.experts.size(); ++i) {
        const Tier t = tiers_[d.experts[i]];
        scratch_tiers_[i] = t;
        ++counters_.accesses;
        counters_.selections += d.tokens[i];
        if (d.hash) ++counters_.hash_accesses;
        if (t == Tier::gpu) {
            ++counters_.gpu_hits;
            counters_.selection_gpu_hits += d.tokens[i];
            counters_.hbm_bytes += bytes;
            continue;
        }
        if (d.hash) ++counters_.hash_prefetched;
        if (t == Tier::host) {
            ++counters_.host_hits;
        } else {
            ++counters_.ssd_reads;
            counters_.ssd_bytes += bytes;
        }
        counters_.pcie_bytes += bytes;
    }
    d.tiers = scratch_tiers_;
    if (policy_.needs_future() && d.next_use.size() != d.experts.size())
        throw_internal(std::string(policy_.name()) + " policy needs the dispatch's next uses");
    scratch_admissions_.clear();
    policy_.decide(d, slots_.gpu - gpu_used_, scratch_admissions_);
    for (const Admission& a : scratch_admissions_) {
        const auto it = std::find(d.experts.begin(), d.experts.end(), a.admit);
        if (it == d.experts.end() || tiers_[a.admit] == Tier::gpu)
            throw_internal(std::string(policy_.name()) + " policy admitted an expert that is not a miss of the dispatch");
        const Tier from = tiers_[a.admit];
        if (from == Tier::host) --host_used_;
        if (a.evicts) {
            if (a.evict >= tiers_.size() || tiers_[a.evict] != Tier::gpu)
                throw_internal(std::string(policy_.name()) + " policy evicted an expert that is not on the GPU");
            if (host_used_ < slots_.host) {
                tiers_[a.evict] = Tier::host;
                ++host_used_;
                ++counters_.demotions_to_host;
                counters_.pcie_bytes += bytes;
            } else {
                tiers_[a.evict] = Tier::ssd;
                ++counters_.drops;
            }
        } else {
            if (gpu_used_ >= slots_.gpu)
                throw_internal(std::string(policy_.name()) + " policy admitted an expert into a full GPU slab");
            ++gpu_used_;
        }
        tiers_[a.admit] = Tier::gpu;
        ++counters_.admissions;
    }
}

}  // namespace aff::placement
