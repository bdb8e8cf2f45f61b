// The one sequence seam: a Sequence is one sequence of tokens run on one forward pass, and
// everything that runs tokens (aff-run, aff-serve, the generation loop of generate.hpp, a
// draft verifier) does so through this interface only. Backends implement it: the CPU
// reference (cpu_sequence.hpp), the GPU model (gpu_sequence.cpp, GPU builds), the server's
// prefix-cached wrapper and its scripted test engine (libaff/serve). open_sequence.hpp
// picks the CPU or the GPU one.
//
// Besides forward, a sequence may offer
//   - snapshots: a copy of its state at its position, restored later (the server's prefix
//     cache keeps these);
//   - rewind: going back to an earlier position p, as if only the first p tokens had been
//     run, which is what speculative decoding needs after a rejected draft. Rewinding is
//     bounded: a sequence keeps what it needs to go back at most rewind_depth() tokens
//     (set_rewind_depth; 0, the default, keeps nothing and costs nothing), and never below
//     the position of its last reset or restore. rewind_floor() says how far back it can go
//     now; a rewind further back is refused with a usage error and changes nothing;
//   - forward_ids: forward's picks without its logits, greedy or sampled (the GPU picks on
//     the device).
#pragma once

#include "libaff/runtime/sampled_pick.hpp"
#include "libaff/runtime/tier_snapshot.hpp"
#include "libaff/runtime/tier_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace aff {

class RouteObserver;  // libaff/model/route_observer.hpp

// A copy of a sequence's state at some position, taken by Sequence::snapshot and put back by
// restore. Only the kind of sequence that took it can restore it.
class SequenceSnapshot {
public:
    virtual ~SequenceSnapshot() = default;
    virtual std::int64_t position() const = 0;
    // Memory the copy holds (host or device), for a cache's budget.
    virtual std::size_t bytes() const = 0;
};

class Sequence {
public:
    virtual ~Sequence() = default;

    // One line: the device and where each part of the model runs.
    virtual std::string describe() const = 0;
    // One line for the end of a run: what the expert tiers' mover did (hit rate per tier,
    // PCIe bytes and moves a token); empty where the experts are not tiered.
    virtual std::string placement_summary() const { return {}; }
    // The same as counters (tier_stats.hpp); nothing where the experts are not tiered. Called
    // on the thread that runs forward (PrefixCachedSequence publishes them for /metrics).
    virtual std::optional<TierStats> tier_stats() const { return std::nullopt; }
    // The counters with where each routed expert is (tier_snapshot.hpp), for the live view.
    // Called on the thread that runs forward, between calls. The default (every expert in
    // one place, no counters): tiered false.
    virtual ExpertTierSnapshot expert_tiers() const { return {}; }
    virtual bool on_gpu() const { return false; }
    // Rows of the logits forward returns.
    virtual std::size_t vocab_size() const = 0;
    // The next position to run (tokens run so far).
    virtual std::int64_t position() const = 0;
    // Drops the sequence: the next forward starts at position 0.
    virtual void reset() = 0;
    // Runs tokens at position(), position()+1, ... and advances; returns float32 logits [n, V]
    // when all_logits, else those of the last token ([V]) (Model::forward's contract).
    virtual std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) = 0;
    // forward's picks: runs the tokens as forward(tokens, all_rows) does and returns, for
    // each row it would return, greedy_pick (greedy_pick.hpp) among the first `candidates`
    // ids (1..vocab_size()) of that row's logits, or with `sampling` sampled_pick's draw
    // (sampled_pick.hpp: temperature only, a verify call's guesses accepted there). A greedy
    // generation, or one whose one filter is the temperature, needs nothing else of its
    // logits (generate.cpp's picks-only modes), so a backend that can pick where its logits
    // are does (the GPU: n ids come back instead of n·V floats); the default picks from
    // forward's rows on the host (row_picks). Same state afterwards as forward.
    virtual std::vector<std::int32_t> forward_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                                  std::size_t candidates, const RowSampling* sampling = nullptr);
    // Route traces: `observer` (not owned; null: none) sees the routing of every later
    // forward (model/route_observer.hpp), replays of a rewind included. The CPU reference and
    // the GPU model support it; the default (a backend that routes nothing) throws unsupported.
    virtual void set_route_observer(RouteObserver* observer);

    // Snapshots. A restored snapshot continues exactly as the sequence it was taken from
    // would have: forward() after restore gives the logits the same calls give there.
    virtual bool can_snapshot() const { return false; }
    // Throws unsupported where can_snapshot() is false.
    virtual std::unique_ptr<SequenceSnapshot> snapshot() const;
    // Replaces the sequence with the snapshot's. Throws usage for a snapshot another kind of
    // sequence took, unsupported where can_snapshot() is false.
    virtual void restore(const SequenceSnapshot& snapshot);

    // Rewind (see the file comment). set_rewind_depth throws unsupported for a depth above 0
    // on a sequence that cannot rewind.
    virtual void set_rewind_depth(std::size_t tokens);
    virtual std::size_t rewind_depth() const { return 0; }
    // The lowest position rewind() accepts now (position() where nothing is kept).
    virtual std::int64_t rewind_floor() const { return position(); }
    // Goes back to `position` (rewind_floor() <= position <= position()). Throws usage outside
    // that range, leaving the sequence as it was.
    void rewind(std::int64_t position);

protected:
    // rewind() after its range check, for position < position().
    virtual void rewind_to(std::int64_t position);
};

}  // namespace aff
