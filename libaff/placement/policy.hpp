// The decision interface between the placement engine (engine.hpp) and its policies: after
// each dispatch (one layer of one step) a policy sees which distinct experts the tokens
// chose, how many tokens chose each and where each one was, and answers which of them to
// admit into the GPU and which GPU experts to evict for them. Policies admit only experts
// of the dispatch they just saw (an admitted miss's streamed bytes fill its slot), which is
// what makes Belady's MIN (belady_policy.cpp) the bound on every policy's GPU hits.
#pragma once

#include "libaff/placement/tiers.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aff::placement {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

struct Dispatch {
    std::uint64_t index = 0;  // dispatches before this one
    std::uint64_t step = 0;   // the step it belongs to
    std::uint32_t layer = 0;
    bool hash = false;                      // a hash-routed layer (experts known from the token ids)
    std::span<const ExpertKey> experts;     // distinct
    std::span<const std::uint32_t> tokens;  // tokens that chose each
    std::span<const Tier> tiers;            // where each was when the dispatch ran
    // Offline knowledge for Belady: the index of each expert's next dispatch (kNever: none).
    std::span<const std::uint64_t> next_use;
};

struct Admission {
    ExpertKey admit = 0;
    bool evicts = false;  // false: it takes a free GPU slot
    ExpertKey evict = 0;
};

class Policy {
public:
    virtual ~Policy() = default;
    virtual std::string_view name() const = 0;
    // Offline policies need Dispatch::next_use filled.
    virtual bool needs_future() const { return false; }
    // The initial GPU residents and the slab's size, before the first dispatch; first_use
    // (offline policies only, else empty): each key's first dispatch index or kNever.
    virtual void start(const Geometry& geometry, std::span<const Tier> tiers, std::uint32_t gpu_slots,
                       std::span<const std::uint64_t> first_use) = 0;
    // After `d` was served: admissions in order (each evicted key must be a GPU resident
    // that no earlier admission of the call evicted; admitted keys must be experts of `d`
    // that were not on the GPU). free_slots is the slab's free slots before the call.
    virtual void decide(const Dispatch& d, std::uint32_t free_slots, std::vector<Admission>& out) = 0;
};

// Diagnostic variants of the heat policy that replace one of its two decisions by the
// offline answer (they need Dispatch::next_use, as Belady does): they measure how much of
// Belady's lead each decision accounts for. Benchmarks only; not a policy to run.
enum class HeatOracle : std::uint8_t {
    none,       // the heat policy itself
    admission,  // heat picks the victim; the candidate is admitted iff it is needed before the victim
    eviction,   // the victim is the resident needed last; heat's admission test is applied against it
};

// The knobs of the heat policy (heat_policy.cpp), with the defaults aff uses.
struct HeatOptions {
    double half_life_steps = 32;   // heat halves every this many steps without use
    // A dispatch credits each distinct expert tokens^token_weight: 1 weights by the tokens that
    // chose it, 0 credits once a dispatch (what a hit is worth: its bytes are read once however
    // many tokens use them). 0.5: a 64-token prefill chunk's favourite earns 8, not 64.
    double token_weight = 0.5;
    double hysteresis = 0.25;      // admit only when the candidate's heat exceeds the victim's by this fraction
    double min_gain = 0.5;         // ... and by at least this much heat (tokens)
    std::uint32_t max_moves = 4;   // admissions per dispatch
    double lead_limit = 64;        // heat is capped here, so an old favourite loses its lead in bounded time
    std::uint32_t shadow_slots = 8;  // copies in flight at once (in replay a copy lands before the next dispatch)
    HeatOracle oracle = HeatOracle::none;
};

// The heat knobs the GPU's mover starts from (aff-run, aff-serve, GpuTierOptions), where
// HeatOptions{} is what aff-trace replay starts from. Replay charges a move nothing but its
// bytes; on the GPU a promotion's copy shares the bus with the next call's pooled reads and
// stalls it (0.9-2.1 ms a token at 3.6-6.2 moves a token on the emulated 24-64 GiB cards:
// tests/bench/RESULTS.md, session 9). So the GPU mover is reluctant: one admission a
// dispatch, and only for an expert clearly hotter than its victim (twice its heat and 8
// tokens more), which leaves near-uniform routing alone and still brings in an expert that
// stays hot for a dozen steps. tiers_bench measures both on the GPU in one run (variants
// heat and eager-heat; RESULTS.md, sessions 9 and 10).
inline HeatOptions gpu_mover_heat_options() {
    HeatOptions h;
    h.max_moves = 1;
    h.min_gain = 8;
    h.hysteresis = 1.0;
    return h;
}

// "heat", "demand", "static", "lru", "lfu", "belady"; throws aff::Error (usage) otherwise.
std::unique_ptr<Policy> make_policy(std::string_view name, const HeatOptions& heat = {});
std::span<const std::string_view> policy_names();

}  // namespace aff::placement
