// Which staging slot each SSD-resident expert is read into (the GPU's SSD tier, libaff/gpu/
// ssd_tier.hpp): a fixed number of equal slots of pinned host memory the kernels read over the bus,
// holding the experts of the slab-and-pool-less tier that a dispatch needs. A dispatch's experts
// must all be in slots at once (one kernel launch reads them), so acquire() places them together:
// one already in a slot keeps it (no read), the others take a free slot or the least recently used
// one of an expert that the dispatch does not need (its bytes are then overwritten: the caller
// repoints that expert away first). Slots keep their expert after the dispatch, so an expert that
// is routed to again soon is not read twice. Pure logic, so that it is tested on the CPU; the
// caller orders the reuse against the kernels that read a slot (see ssd_tier.hpp).
#pragma once

#include "libaff/placement/tiers.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace aff::placement {

class StagingSlots {
public:
    explicit StagingSlots(std::uint32_t slots);

    struct Grant {
        ExpertKey key = 0;
        std::uint32_t slot = 0;
        bool read = false;     // the key's bytes must be read into the slot (it was not there)
        bool evicts = false;   // the slot held another key until now
        ExpertKey evicted = 0;
    };
    // Places every key (distinct; at most slots() of them) and returns one grant per key, in the
    // keys' order. Throws aff::Error (usage) on a repeated key or more keys than slots.
    std::vector<Grant> acquire(std::span<const ExpertKey> keys);
    // The key leaves its slot (promoted out of the SSD tier); the slot becomes free. No-op if absent.
    void release(ExpertKey key);
    std::optional<std::uint32_t> slot_of(ExpertKey key) const;
    // The key a slot holds, if any.
    std::optional<ExpertKey> held_by(std::uint32_t slot) const;

    std::uint32_t slots() const { return static_cast<std::uint32_t>(holder_.size()); }
    std::uint32_t used() const { return static_cast<std::uint32_t>(where_.size()); }
    std::uint64_t hits() const { return hits_; }    // keys found in their slot
    std::uint64_t reads() const { return reads_; }  // keys granted a read

private:
    static constexpr std::uint32_t kFree = 0xffffffffu;
    std::vector<ExpertKey> holder_;      // per slot: the key, or kFree
    std::vector<std::uint64_t> used_at_;  // per slot: the acquire() that last granted it
    std::vector<std::uint32_t> free_;    // free slots, the lowest last
    std::unordered_map<ExpertKey, std::uint32_t> where_;
    std::uint64_t clock_ = 0, hits_ = 0, reads_ = 0;
};

}  // namespace aff::placement
