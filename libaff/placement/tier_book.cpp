// TierBook (tier_book.hpp): the slots behind the engine's tiers, move by move.
#include "libaff/placement/tier_book.hpp"

#include "libaff/core/error.hpp"

#include <string>

namespace aff::placement {

TierBook::TierBook(const Geometry& geometry, Slots slots, std::span<const ExpertKey> order)
    : geometry_(geometry), tier_(initial_tiers(geometry, slots, order)), slot_(geometry.keys(), 0),
      ssd_in_layer_(geometry.layers, 0) {
    std::uint32_t next_gpu = 0, next_host = 0;
    for (const ExpertKey k : order) {
        if (tier_[k] == Tier::gpu) slot_[k] = next_gpu++;
        else if (tier_[k] == Tier::host) slot_[k] = next_host++;
    }
    for (ExpertKey k = 0; k < geometry.keys(); ++k)
        if (tier_[k] == Tier::ssd) ++ssd_in_layer_[geometry.layer_of(k)];
    for (std::uint32_t s = slots.gpu; s-- > next_gpu;) free_gpu_.push_back(s);  // the lowest taken first
    for (std::uint32_t s = slots.host; s-- > next_host;) free_host_.push_back(s);
}

TierBook::Move TierBook::admit(const Admission& a, Tier victim_to) {
    const auto name = [](ExpertKey k) { return "expert key " + std::to_string(k); };
    if (a.admit >= tier_.size() || tier_[a.admit] == Tier::gpu)
        throw_internal("expert tiers: admitted " + name(a.admit) + ", which is not in the pool or on the SSD");
    Move m;
    m.admit = a.admit;
    m.from = tier_[a.admit];
    m.from_slot = m.from == Tier::host ? slot_[a.admit] : 0;
    m.evicts = a.evicts;
    if (a.evicts) {
        if (a.evict >= tier_.size() || tier_[a.evict] != Tier::gpu)
            throw_internal("expert tiers: a victim (" + name(a.evict) + ") not in the slab");
        if (victim_to == Tier::gpu) throw_internal("expert tiers: a victim (" + name(a.evict) + ") kept in the slab");
        // From the pool the victim takes the slot the admitted expert leaves: the engine always
        // finds it room there (the admission freed one).
        if (m.from == Tier::host && victim_to != Tier::host)
            throw_internal("expert tiers: a victim (" + name(a.evict) + ") of a pool expert not demoted to the pool");
        if (m.from == Tier::ssd && victim_to == Tier::host && free_host_.empty())
            throw_internal("expert tiers: a victim (" + name(a.evict) + ") demoted into a full pool");
        m.evict = a.evict;
        m.evict_to = victim_to;
        m.gpu_slot = slot_[a.evict];
        if (victim_to == Tier::host) {
            if (m.from == Tier::host) {
                m.evict_slot = m.from_slot;
            } else {
                m.evict_slot = free_host_.back();
                free_host_.pop_back();
            }
            slot_[a.evict] = m.evict_slot;
        } else {
            ++ssd_in_layer_[geometry_.layer_of(a.evict)];
        }
        tier_[a.evict] = victim_to;
    } else {
        if (free_gpu_.empty()) throw_internal("expert tiers: an admission (" + name(a.admit) + ") into a full slab");
        m.gpu_slot = free_gpu_.back();
        free_gpu_.pop_back();
        if (m.from == Tier::host) free_host_.push_back(m.from_slot);
    }
    if (m.from == Tier::ssd) --ssd_in_layer_[geometry_.layer_of(a.admit)];
    tier_[a.admit] = Tier::gpu;
    slot_[a.admit] = m.gpu_slot;
    return m;
}

}  // namespace aff::placement
