// Which tier and which slot of it every expert occupies while the GPU's mover carries out the
// placement engine's admissions (libaff/gpu/forward_tiers.cpp): the engine (engine.hpp) keeps
// only each expert's tier, the mover must also know the slab slot or pool slot it copies from
// and into, which slots are free, and how many of each layer's experts are on the SSD (a layer
// with any stages them after its router: libaff/gpu/ssd_tier.hpp). Every rule of a move is
// here, pure, so that it is tested on the CPU (tests/unit/placement/tier_book_test.cpp); the GPU
// code only copies the bytes the returned Move names and points the table entries.
//
// A move, per admission (the victim's destination is the engine's: pool if it had room, else
// the SSD, which always holds every expert):
//   from the pool, evicting:     victim slab → the pool slot the admitted expert left;
//   from the pool, free slot:    the admitted expert's pool slot becomes free;
//   from the SSD, evicting:      victim slab → a free pool slot, or back to the SSD;
//   from the SSD, free slot:     nothing else moves.
// The admitted expert takes its victim's slab slot, or a free one.
#pragma once

#include "libaff/placement/policy.hpp"
#include "libaff/placement/tiers.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace aff::placement {

// A policy that passes everything on to another and keeps the admissions it answered, which
// the mover then carries out (the engine applies them to its own book of tiers only).
class RecordingPolicy final : public Policy {
public:
    explicit RecordingPolicy(std::unique_ptr<Policy> inner) : inner_(std::move(inner)) {}
    std::string_view name() const override { return inner_->name(); }
    bool needs_future() const override { return inner_->needs_future(); }
    void start(const Geometry& g, std::span<const Tier> tiers, std::uint32_t slots,
               std::span<const std::uint64_t> first_use) override {
        inner_->start(g, tiers, slots, first_use);
    }
    void decide(const Dispatch& d, std::uint32_t free_slots, std::vector<Admission>& out) override {
        const std::size_t before = out.size();
        inner_->decide(d, free_slots, out);
        decided.insert(decided.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    }
    std::vector<Admission> decided;  // since the mover last took them

private:
    std::unique_ptr<Policy> inner_;
};

class TierBook {
public:
    // initial_tiers(geometry, slots, order), slots handed out in the order's order (the busiest
    // expert of each tier in its slot 0); the remaining slots free.
    TierBook(const Geometry& geometry, Slots slots, std::span<const ExpertKey> order);

    struct Move {
        ExpertKey admit = 0;
        Tier from = Tier::ssd;        // the pool or the SSD
        std::uint32_t from_slot = 0;  // its pool slot (from the pool)
        std::uint32_t gpu_slot = 0;   // the slab slot it now holds
        bool evicts = false;
        ExpertKey evict = 0;
        Tier evict_to = Tier::ssd;    // the pool or the SSD
        std::uint32_t evict_slot = 0; // its pool slot (to the pool)
    };
    // Carries out one admission; victim_to is where the engine put the victim (its tier after
    // the dispatch). Throws aff::Error (internal) on an admission the book cannot carry out (an
    // expert already in the slab, a victim not in it, a full slab or pool), changing nothing.
    Move admit(const Admission& a, Tier victim_to);

    Tier tier(ExpertKey key) const { return tier_[key]; }
    std::uint32_t slot(ExpertKey key) const { return slot_[key]; }  // meaningless on the SSD
    std::span<const Tier> tiers() const { return tier_; }
    std::uint32_t ssd_in_layer(std::uint32_t layer) const { return ssd_in_layer_[layer]; }
    std::uint32_t free_gpu() const { return static_cast<std::uint32_t>(free_gpu_.size()); }
    std::uint32_t free_host() const { return static_cast<std::uint32_t>(free_host_.size()); }
    const Geometry& geometry() const { return geometry_; }

private:
    Geometry geometry_;
    std::vector<Tier> tier_;
    std::vector<std::uint32_t> slot_;
    std::vector<std::uint32_t> free_gpu_, free_host_;  // slots nobody holds, the next taken last
    std::vector<std::uint32_t> ssd_in_layer_;
};

}  // namespace aff::placement
