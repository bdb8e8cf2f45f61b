// One part of GpuModel::Impl (forward_impl.hpp): the expert tiers (GpuTierOptions in
// forward.hpp). When the routed experts do not all fit the GPU, each codebook-stored expert's
// extent lives in one slot of a GPU slab (one allocation of equal slots, any layer's expert in
// any slot) or of one pinned host pool mapped into the GPU's address space, and the expert
// table [layer][expert] points at it: the kernels are the ones the all-resident model runs and
// read the same bytes, so the logits are the same bit for bit (tests/gpu/tiers_test.cpp).
// How many slots each tier gets is placement::plan_tiers's arithmetic (tier_plan.hpp); which
// expert starts where, the profile order (placement/tiers.hpp). Between calls the mover
// (forward_tiers.cpp) feeds the routing of the call just made (from the route ring,
// route_ring.hpp, calls of any length) to the placement engine
// (placement/engine.hpp) and carries out its admissions: a promoted expert's bytes are copied
// pool → slab into its victim's slot, the victim's slab → pool into the slot it left, on a
// copy stream of its own (the events that order it with the model's stream: forward_tiers.cpp).
// Experts in neither tier stay on the SSD (ssd_tier.hpp: read into staging slots when routed to).
// Private to the GPU forward.
#pragma once

#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/gpu/ssd_tier.hpp"
#include "kernels/expert_stage.hpp"
#include "libaff/placement/engine.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/placement/tier_book.hpp"
#include "libaff/placement/tier_plan.hpp"
#include "libaff/placement/tiers.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace aff::gpu::fwd {

using placement::RecordingPolicy;

struct ExpertTiers {
    int layers = 0, experts = 0, top_k = 0;
    std::size_t slot_bytes = 0;
    placement::TierInputs inputs;
    placement::TierPlan plan;
    std::string why;  // why the experts are tiered

    Buffer slab;        // plan.gpu_slots slots
    PinnedBuffer pool;  // plan.host_slots slots
    Buffer staging;     // one slot on the device: a victim's bytes while its slot is refilled

    // Where each expert (key = layer · experts + expert) is: its tier and slot there, the free
    // slots, the SSD experts per layer (placement/tier_book.hpp: the mover's moves).
    std::unique_ptr<placement::TierBook> book;

    std::unique_ptr<SsdTier> ssd;  // with experts on the SSD (set up by GpuModel::Impl::setup_ssd)

    // The prefill GEMMs' staging counters (kernels/expert_stage.hpp, ExpertStageCounter; device,
    // zeroed at load) and their host copy, read back by GpuModel::tiers only after a call staged
    // (stage_dirty): a report between decode steps costs no synchronize.
    Buffer stage_counters;
    std::uint32_t stage_read[4] = {};
    bool stage_dirty = false;

    std::unique_ptr<RecordingPolicy> policy;
    std::unique_ptr<placement::PlacementEngine> engine;
    std::uint64_t dispatches = 0, steps = 0, tokens = 0, moves = 0, moved_bytes = 0;
    double move_seconds = 0;

    // The mover's copies and how they are ordered with the model's stream (forward_tiers.cpp).
    Stream copy_stream;
    Event call_done;    // on the model's stream after a call: the copies start after it
    Event copies_start; // on the copy stream once it may start (after call_done)
    Event moves_done;   // on the copy stream after a pass's copies and table upload
    Event call_start;   // on the model's stream where the next call waits for moves_done
    PinnedBuffer table_upload;  // the expert table as the copy stream uploads it (host side stays put)
    bool moves_queued = false;  // moves_done recorded, no call has waited for it yet
    bool stall_open = false;    // a call waited: its stall is read at the next pass
    double stall_seconds = 0;   // the model's stream waited this long on the copies, in all
    double copy_seconds = 0;    // the copy stream's busy time (copies_start to moves_done), in all
    // The decode prefetch (forward_prefetch.cpp): its own stream, forked from the model's
    // stream after a layer's attention site and joined before that layer's routed experts
    // (two events, recorded inside a captured decode graph as well), and its counters: the
    // kExpertStageCounters of expert_stage (prefetched experts, predicted pooled ones left in
    // place, ...) then the prefetched experts the router chose (kPrefetchHits), with their host
    // copy, read back at each report once any call prefetched (prefetch_armed: a replayed graph
    // adds to them without passing through the host code that queued the prefetch).
    static constexpr int kPrefetchHits = kExpertStageCounters;
    Stream prefetch_stream;
    Event prefetch_fork, prefetch_join;
    Buffer prefetch_counters;
    std::uint32_t prefetch_read[kExpertStageCounters + 1] = {};
    bool prefetch_armed = false;
    std::uint64_t stalled_calls = 0;  // calls that waited on copies at all (> 0 ms)
    std::uint64_t waited_calls = 0;   // calls queued behind a pass's copies

    ExpertTiers() = default;
    ExpertTiers(const ExpertTiers&) = delete;
    ExpertTiers& operator=(const ExpertTiers&) = delete;
    ~ExpertTiers();  // waits for the copy stream: its copies read and write the buffers

    // Plans the tiers (plan_tiers on `in`), allocates the slab, the pool and the staging slot,
    // and places every expert: the `order`'s first plan.gpu_slots in the slab, the next
    // plan.host_slots in the pool, the rest on the SSD. hash: per layer,
    // routed by token id. Nothing is filled yet.
    void setup(const ModelConfig& c, const GpuTierOptions& options, const placement::TierInputs& in,
               const std::vector<bool>& hash);
    // The address the kernels read expert e of layer l at (slab or the pool's device view;
    // null on the SSD: staged when routed to).
    const std::uint8_t* address(int l, int e) const;
    // Fills every expert's slot with its extent's bytes (fill writes them at dst), the pool's
    // directly, the slab's through host staging on `stream`; returns when done.
    void fill(const std::function<void(int, int, std::uint8_t*)>& fill_extent, const Stream& stream);
    // Before a call's first launch on `stream` (the model's): waits there for the last pass's
    // copies, when one queued any.
    void wait_for_moves(const Stream& stream);
};

}  // namespace aff::gpu::fwd
