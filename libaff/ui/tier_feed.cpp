// A sequence's expert tiers onto the live view's board (see tier_feed.hpp).
#include "libaff/ui/tier_feed.hpp"

namespace aff::ui {
namespace {

double share(std::uint64_t part, std::uint64_t whole) { return whole ? double(part) / double(whole) : 0.0; }

Tier view_tier(placement::Tier t) {
    switch (t) {
        case placement::Tier::gpu: return Tier::gpu;
        case placement::Tier::host: return Tier::host;
        case placement::Tier::ssd: return Tier::ssd;
    }
    return Tier::unknown;
}

}  // namespace

TierFigures tier_figures(const ExpertTierSnapshot& s, bool on_gpu) {
    TierFigures f;
    f.why = s.why;
    f.tiered = s.tiered;
    if (!s.tiered) {
        f.resident = on_gpu ? "GPU" : "CPU";
        return f;
    }
    const TierStats& k = s.counters;
    f.on_gpu = k.gpu_experts;
    f.in_host = k.host_experts;
    f.on_ssd = k.ssd_experts;
    f.has_ssd_tier = s.has_ssd_tier;
    f.hit_rates = {{"GPU", share(k.gpu_hits, k.expert_reads)}, {"host", share(k.host_hits, k.expert_reads)}};
    if (s.has_ssd_tier) f.hit_rates.push_back({"SSD", share(k.ssd_reads, k.expert_reads)});
    // Of the host's, the reads the decode prefetch had already copied into GPU memory (what
    // brings the GPU's share towards an optimal slab's: tests/bench/RESULTS.md, session 16).
    if (k.prefetched > 0) f.hit_rates.push_back({"prefetched", share(k.prefetch_hits, k.expert_reads)});
    f.moves_per_token = share(k.moves, k.tokens);
    f.cpu_expert_share = s.cpu_expert_share;
    return f;
}

std::vector<Tier> plane_tiers(const ExpertTierSnapshot& s) {
    std::vector<Tier> tiers;
    if (s.where.size() != std::size_t(s.layers) * std::size_t(s.experts)) return tiers;
    tiers.reserve(s.where.size());
    for (placement::Tier t : s.where) tiers.push_back(view_tier(t));
    return tiers;
}

void TierFeed::publish(const ExpertTierSnapshot& s, bool on_gpu, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    last_ = now;
    TierFigures f = tier_figures(s, on_gpu);
    if (s.tiered) {
        const TierStats& k = s.counters;
        samples_.push_back({now, k.pcie_bytes, k.ssd_bytes});
        while (samples_.size() > 2 && now - samples_[1].at >= std::chrono::seconds(1)) samples_.pop_front();
        const Sample& first = samples_.front();
        const double dt = std::chrono::duration<double>(now - first.at).count();
        if (dt > 0) {
            f.pcie_bytes_s = double(k.pcie_bytes - first.pcie_bytes) / dt;
            f.ssd_bytes_s = double(k.ssd_bytes - first.ssd_bytes) / dt;
        }
        if (!mapped_ || k.moves != last_moves_) {
            std::vector<Tier> map = plane_tiers(s);
            if (!map.empty()) {
                board_.publish_plane_tiers(std::move(map), "tiers: expert table, " + std::to_string(k.moves) + " moves");
                mapped_ = true;
            }
            last_moves_ = k.moves;
        }
    }
    figures_ = f;
    published_ = true;
    board_.publish_tiers(f);
}

void TierFeed::between_calls(const Sequence& sequence, Clock::time_point now) {
    {
        std::lock_guard lock(mutex_);
        if (published_ && now - last_ < std::chrono::milliseconds(200)) return;
    }
    publish(sequence.expert_tiers(), sequence.on_gpu(), now);
}

void TierFeed::idle() {
    std::lock_guard lock(mutex_);
    if (!published_ || !figures_.tiered) return;
    figures_.pcie_bytes_s = figures_.ssd_bytes_s = 0;
    samples_.clear();
    board_.publish_tiers(figures_);
}

}  // namespace aff::ui
