// Synthetic route traces with the shape of measured V4-Flash routing, for judging placement
// policies where no trained model's trace is at hand (random-weight models route near
// uniformly, which no cache can exploit). Per learned layer, experts are drawn from a
// Zipf-like popularity over a per-layer random ranking, mixed with a uniform floor:
//   P(rank r) = (1 − floor) · (r + 1)^−s / Σ + floor / E,  s drawn per layer around zipf_s.
// With s ≈ 1.6 and floor 0.15 over 256 experts, P itself gives the busiest tenth ≈ 80 % of
// the mass and needs ≈ 241 experts for 99 %, the published V4-Flash figures (shared docs,
// anchors.md: ~80 %; 240–251 of 256). The traces, where each token draws six distinct
// experts, measure less of a head: `aff-trace summary` of the v4flash family gives its
// learned layers a busiest-tenth share of 63–66 % and 99 % coverage at 241–243 experts, so
// they match the coverage figure and fall short of the 80 % head (a steeper exponent
// raises the head and lowers the coverage: s = 1.4 with floor 0.02 gives 74 % and 209). The ranking drifts (random rank swaps
// each step) and bursts (a small set of experts favoured for a few dozen steps, as when a
// conversation turns to code) move the hot set over time. Hash layers choose through a
// random tid2eid table from Zipf-distributed token ids, so consecutive tokens share ≈ K/E
// of their experts (6/256 = 2.3 %; measured on V4-Flash: 2–3 %). Deterministic in the seeds;
// traces of one model_seed and different seeds are two runs of the same model, so a profile
// fitted from one is a fair initial placement for the other.
#pragma once

#include "libaff/trace/route_trace.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace aff::trace {

struct SyntheticParams {
    std::uint32_t layers = 43, experts = 256, top_k = 6, hash_layers = 3;  // V4-Flash: layers 0-2 hashed
    std::uint64_t expert_bytes = 9043968;  // 3 x 2048 x 4096 weights at 2.875 bits (anchors.md)
    double zipf_s = 1.6, zipf_s_spread = 0.2;  // per-layer exponent: zipf_s ± spread (uniform)
    double floor = 0.15;                       // uniform share of every selection
    double drift_swaps = 0.05;                 // random rank swaps per layer per step
    double burst_rate = 0.0;                   // chance a step starts a burst (when none is running)
    std::uint32_t burst_steps = 32, burst_experts = 8;
    double burst_weight = 0.5;                 // share of selections drawn from the burst set
    std::uint32_t sequences = 8, prompt_tokens = 256, prefill_chunk = 64, decode_tokens = 512;
    std::uint32_t vocab = 32000;
    double token_zipf_s = 1.05;
    std::uint64_t seed = 1;        // the token stream: ids, draws, drift and bursts
    std::uint64_t model_seed = 1;  // the "model": per-layer exponents, rankings, tid2eid tables
};

// The named families (docs and RESULTS.md use them): "v4flash" (the defaults), "drift"
// (ten times the drift), "bursty" (bursts every ~100 steps), "uniform" (floor 1: a
// random-weight model), "tiny" (2 layers x 8 experts, top-2, layer 0 hashed; tests).
// Throws aff::Error (usage) for another name.
SyntheticParams synthetic_family(std::string_view name);
std::span<const std::string_view> synthetic_family_names();

RouteTrace synthesize(const SyntheticParams& params);

// The distribution oracle on the trace synthesize(params) makes: before each step it holds
// the gpu_slots experts (over all layers) that one token is likeliest to select under the
// generator's state at that step (each layer's current ranking, the running burst, the
// token distribution through the hash tables), moving freely. Draws are independent given
// that state, so no online policy, which sees only past draws, can expect more GPU hits:
// it is the bound for online policies on this family, where Belady's MIN (which knows the
// draws themselves) is the bound for any policy. Counted as replay counts: one access per
// distinct expert a dispatch.
struct OracleCounts {
    std::uint64_t accesses = 0, gpu_hits = 0;
    double hit_rate() const { return accesses ? double(gpu_hits) / double(accesses) : 0.0; }
};
OracleCounts synthetic_oracle(const SyntheticParams& params, std::uint32_t gpu_slots);

}  // namespace aff::trace
