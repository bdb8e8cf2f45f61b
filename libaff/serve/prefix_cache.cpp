// The prefix cache's lookup, insertion and LRU eviction (see prefix_cache.hpp). Lookup
// scans every entry: a server holds a few dozen snapshots at most (each is megabytes),
// and comparing their tokens costs far less than prefilling one token.
#include "libaff/serve/prefix_cache.hpp"

#include <algorithm>

namespace aff::serve {

std::size_t PrefixCache::entry_bytes(std::size_t tokens, const CachedState& state) {
    return state.bytes() + tokens * sizeof(std::int32_t) + sizeof(Entry);
}

PrefixCache::Match PrefixCache::find(std::span<const std::int32_t> prompt, std::size_t max_tokens) {
    ++stats_.lookups;
    const std::size_t limit = std::min(max_tokens, prompt.size());
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const std::size_t n = it->tokens.size();
        if (n == 0 || n > limit || (best != entries_.end() && n <= best->tokens.size())) continue;
        if (std::equal(it->tokens.begin(), it->tokens.end(), prompt.begin())) best = it;
    }
    if (best == entries_.end()) return {};
    entries_.splice(entries_.begin(), entries_, best);
    ++stats_.hits;
    stats_.hit_tokens += best->tokens.size();
    return {best->tokens.size(), best->state};
}

bool PrefixCache::contains(std::span<const std::int32_t> tokens) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) {
        return std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end());
    });
}

bool PrefixCache::insert(std::vector<std::int32_t> tokens, std::shared_ptr<const CachedState> state) {
    if (!enabled() || !state || tokens.empty()) return false;
    const std::size_t bytes = entry_bytes(tokens.size(), *state);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->tokens == tokens) {
            stats_.bytes -= it->bytes;
            --stats_.entries;
            entries_.erase(it);
            break;
        }
    }
    if (bytes > stats_.capacity_bytes) return false;
    while (stats_.bytes + bytes > stats_.capacity_bytes) {
        stats_.bytes -= entries_.back().bytes;
        --stats_.entries;
        ++stats_.evictions;
        entries_.pop_back();
    }
    entries_.push_front({std::move(tokens), std::move(state), bytes});
    stats_.bytes += bytes;
    ++stats_.entries;
    ++stats_.inserts;
    return true;
}

}  // namespace aff::serve
