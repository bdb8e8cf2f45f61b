// StagingSlots (staging_slots.hpp): least recently used slots, the dispatch's own keys pinned.
#include "libaff/placement/staging_slots.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <string>

namespace aff::placement {

StagingSlots::StagingSlots(std::uint32_t slots) : holder_(slots, kFree), used_at_(slots, 0) {
    for (std::uint32_t s = slots; s-- > 0;) free_.push_back(s);
}

std::vector<StagingSlots::Grant> StagingSlots::acquire(std::span<const ExpertKey> keys) {
    if (keys.size() > holder_.size())
        throw_usage("staging slots: a dispatch needs " + std::to_string(keys.size()) + " experts read from the SSD, " +
                    std::to_string(holder_.size()) + " slots");
    std::vector<ExpertKey> sorted(keys.begin(), keys.end());
    std::sort(sorted.begin(), sorted.end());
    if (const auto d = std::adjacent_find(sorted.begin(), sorted.end()); d != sorted.end())
        throw_usage("staging slots: expert key " + std::to_string(*d) + " twice in one dispatch");
    const std::uint64_t now = ++clock_;
    std::vector<Grant> grants(keys.size());
    // First the keys already held: their slots are this dispatch's and may not be taken below.
    for (std::size_t i = 0; i < keys.size(); ++i) {
        grants[i].key = keys[i];
        const auto it = where_.find(keys[i]);
        if (it == where_.end()) {
            grants[i].read = true;
            continue;
        }
        used_at_[it->second] = now;
        grants[i].slot = it->second;
        ++hits_;
    }
    for (Grant& g : grants) {
        if (!g.read) continue;
        std::uint32_t s = kFree;
        if (!free_.empty()) {
            s = free_.back();
            free_.pop_back();
        } else {  // the least recently used slot this dispatch does not hold
            std::uint64_t oldest = now;
            for (std::uint32_t j = 0; j < holder_.size(); ++j)
                if (used_at_[j] < oldest) oldest = used_at_[j], s = j;
            if (s == kFree) throw_internal("staging slots: no slot left for a dispatch that fits");
            g.evicts = true;
            g.evicted = holder_[s];
            where_.erase(holder_[s]);
        }
        holder_[s] = g.key;
        used_at_[s] = now;
        where_[g.key] = s;
        g.slot = s;
        ++reads_;
    }
    return grants;
}

void StagingSlots::release(ExpertKey key) {
    const auto it = where_.find(key);
    if (it == where_.end()) return;
    holder_[it->second] = kFree;
    used_at_[it->second] = 0;
    free_.push_back(it->second);
    where_.erase(it);
}

std::optional<std::uint32_t> StagingSlots::slot_of(ExpertKey key) const {
    const auto it = where_.find(key);
    if (it == where_.end()) return std::nullopt;
    return it->second;
}

std::optional<ExpertKey> StagingSlots::held_by(std::uint32_t slot) const {
    if (slot >= holder_.size() || holder_[slot] == kFree) return std::nullopt;
    return holder_[slot];
}

}  // namespace aff::placement
