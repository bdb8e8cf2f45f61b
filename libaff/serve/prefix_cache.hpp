// The server's prefix cache: snapshots of a sequence's decode state (runtime/sequence.hpp's
// SequenceSnapshot, or anything else with a size) keyed by the exact tokens that were run
// to reach it. Chat clients resend the whole conversation each turn; a prompt that starts
// with a cached token sequence restores that state and prefills only the rest.
// Matching is at snapshot boundaries only: a state cannot be rolled back, so an entry is
// usable only when all of its tokens are a prefix of the new prompt. Memory is bounded
// (tokens and state bytes together); the least recently used entry goes first. Which
// points of a sequence to snapshot is the engine's choice (model_engine.cpp). Not
// thread-safe: the engine it belongs to runs one sequence at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

namespace aff::serve {

// What an entry keeps; bytes() is what the budget counts (besides the tokens).
class CachedState {
public:
    virtual ~CachedState() = default;
    virtual std::size_t bytes() const = 0;
};

struct PrefixCacheStats {
    std::size_t capacity_bytes = 0;
    std::size_t bytes = 0;       // held now
    std::size_t entries = 0;     // held now
    std::uint64_t lookups = 0;   // find() calls
    std::uint64_t hits = 0;      // ... that matched an entry
    std::uint64_t hit_tokens = 0;
    std::uint64_t inserts = 0;   // entries stored
    std::uint64_t evictions = 0; // entries dropped to make room
};

class PrefixCache {
public:
    // capacity_bytes 0 disables the cache: nothing is stored, nothing matches.
    explicit PrefixCache(std::size_t capacity_bytes) { stats_.capacity_bytes = capacity_bytes; }

    bool enabled() const { return stats_.capacity_bytes > 0; }

    struct Match {
        std::size_t tokens = 0;                  // length of the matched entry (0: none)
        std::shared_ptr<const CachedState> state;
    };
    // The longest entry whose tokens are a prefix of `prompt` and at most `max_tokens`
    // long; it becomes the most recently used.
    Match find(std::span<const std::int32_t> prompt, std::size_t max_tokens);

    // Stores `state` under `tokens` as the most recently used entry (replacing an entry of
    // the same tokens), then evicts least recently used entries until the total fits.
    // An entry larger than the whole capacity is not stored. Returns whether it was.
    bool insert(std::vector<std::int32_t> tokens, std::shared_ptr<const CachedState> state);

    // Whether an entry has exactly these tokens (does not touch the LRU order).
    bool contains(std::span<const std::int32_t> tokens) const;

    // Bytes an entry of `tokens` tokens and this state costs against the capacity.
    static std::size_t entry_bytes(std::size_t tokens, const CachedState& state);

    const PrefixCacheStats& stats() const { return stats_; }

private:
    struct Entry {
        std::vector<std::int32_t> tokens;
        std::shared_ptr<const CachedState> state;
        std::size_t bytes = 0;
    };
    std::list<Entry> entries_;  // most recently used first
    PrefixCacheStats stats_;
};

}  // namespace aff::serve
