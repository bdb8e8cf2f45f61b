// The live view's Tiers panel and the expert plane's tier colours from the sequence the run
// computes on (Sequence::expert_tiers, runtime/tier_snapshot.hpp): counts per tier, hit
// rates and moves per token since the model loaded, PCIe and SSD bytes a second over about
// the last second, and the tier of every (layer, expert). The snapshot is taken on the
// compute thread between forward calls (the mover changes the tiers only there), at most 5
// times a second (between_calls), and published to the board; the view thread only reads
// the board. A sequence whose experts are all in one place publishes that ("all resident
// (CPU)") and leaves the plane's one-colour map as resident_expert_plane drew it.
#pragma once

#include "libaff/runtime/sequence.hpp"
#include "libaff/ui/stats.hpp"

#include <chrono>
#include <deque>
#include <mutex>

namespace aff::ui {

// The panel's figures from a snapshot; rates are left 0 (they need two snapshots).
// on_gpu: where the experts are when not tiered (Sequence::on_gpu).
TierFigures tier_figures(const ExpertTierSnapshot& snapshot, bool on_gpu);
// The plane's map in the view's terms ([layers * experts]; empty when the snapshot has none).
std::vector<Tier> plane_tiers(const ExpertTierSnapshot& snapshot);

class TierFeed {
public:
    using Clock = std::chrono::steady_clock;
    explicit TierFeed(StatsBoard& board) : board_(board) {}

    // Publishes the figures of `snapshot`, taken at `now`: rates over the snapshots of about
    // the last second, the plane's tiers when the map changed (first, or after a move).
    void publish(const ExpertTierSnapshot& snapshot, bool on_gpu, Clock::time_point now = Clock::now());
    // From the compute thread after a forward call: takes and publishes the sequence's
    // snapshot unless one was taken less than 200 ms ago.
    void between_calls(const Sequence& sequence, Clock::time_point now = Clock::now());
    // No call runs (a request ended): nothing crosses the bus, so the rates are 0 until the
    // next call; the counts stay those of the last snapshot.
    void idle();

private:
    struct Sample {
        Clock::time_point at;
        std::uint64_t pcie_bytes = 0, ssd_bytes = 0;
    };
    StatsBoard& board_;
    std::mutex mutex_;
    bool published_ = false, mapped_ = false;
    Clock::time_point last_{};
    std::uint64_t last_moves_ = 0;
    std::deque<Sample> samples_;  // the last second's, and one older
    TierFigures figures_;
};

}  // namespace aff::ui
