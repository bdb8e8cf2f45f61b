// Route traces (formats/route-trace.md): which routed experts every token selected in every
// main layer of every step, with each token's id, sequence, position and phase. This file
// holds the in-memory form and the validating reader; route_trace_writer.hpp writes them.
// The reader checks every rule of the spec and throws one aff::Error naming the field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff::trace {

// formats/route-trace.md §5: draft_verify is every token of a verify call (the rejected
// guesses included: they ran); replay the tokens a rewind into a verify call ran again; draft
// the tokens of a call of the draft model's own MoE layers (the MTP layer, recorded as layer L;
// DSpark's stages, as layers L, L + 1, L + 2 of one step).
enum class Phase : std::uint8_t { prefill = 0, decode = 1, draft_verify = 2, replay = 3, draft = 4 };
constexpr int kPhases = 5;
const char* to_string(Phase phase);

enum class IdentityKind : std::uint32_t { none = 0, container = 1, checkpoint = 2, synthetic = 3 };
const char* to_string(IdentityKind kind);

constexpr std::uint32_t kMaxLayers = 4096, kMaxExperts = 65536, kMaxTopK = 64, kMaxStepTokens = 65536;
// Layer blocks of a draft step at most (§5.1: the MTP layer is one, DSpark's stages three).
constexpr std::uint32_t kMaxDraftLayers = 16;

struct TraceHeader {
    std::uint32_t layers = 0, experts = 0, top_k = 0;
    IdentityKind identity_kind = IdentityKind::none;
    std::uint64_t identity = 0;
    std::uint64_t expert_bytes = 0;  // 0: unknown
    std::vector<bool> hash_layers;   // [layers]

    // Throws aff::Error (format) naming the field when the geometry is outside the spec's ranges.
    void check() const;
};

struct TraceToken {
    std::uint32_t token = 0, sequence = 0, position = 0;
    Phase phase = Phase::prefill;
};

// One forward call: its tokens and, for each recorded layer, each token's K selections.
struct TraceStep {
    std::vector<TraceToken> tokens;
    std::vector<std::uint16_t> layers;   // strictly increasing
    std::vector<std::uint16_t> experts;  // [layers.size()][tokens.size()][K]
    std::vector<float> weights;          // same shape

    std::size_t n() const { return tokens.size(); }
    // A step of the draft model's layers (its tokens' phase is draft), whose layer blocks are
    // numbered L, L + 1, ..., past the main layers (§5.1); every other step records main layers.
    bool draft() const { return !tokens.empty() && tokens.front().phase == Phase::draft; }
    // Token i's K experts in recorded layer block b.
    std::span<const std::uint16_t> selection(std::size_t block, std::size_t i, std::uint32_t k) const {
        return std::span(experts).subspan((block * tokens.size() + i) * k, k);
    }
};

struct RouteTrace {
    TraceHeader header;
    std::vector<TraceStep> steps;
    std::uint64_t token_steps() const;
};

// Validates and decodes a whole trace; `name` is used in messages (FUZZING builds skip digests).
RouteTrace parse_route_trace(std::span<const std::uint8_t> bytes, const std::string& name);
RouteTrace read_route_trace(const std::string& path);

}  // namespace aff::trace
