// A container with DeepSeek-V4-Flash's real geometry and synthetic weights, for what needs
// real shapes but not real values: GPU op checks (aff-gpucheck), decode and prefill
// benchmarks, load tests. The config is the official V4-Flash config.json (model doc §1.2)
// cut to the first N layers as aff-quantize --layers does (so the layer kinds follow the
// real order: sliding, sliding, CSA, HCA, CSA, ...), optionally with fewer routed experts
// or a smaller vocabulary for small files. Dense tensors are written in the official
// checkpoint's storage (FP8 E4M3 with E8M0 128x128 block scales where it has FP8, BF16, F32
// and I64 elsewhere) with random values scaled so activations stay O(1); routed experts are
// TQ2875 matrices of random index bits and plausible bf16 block scales under the built-in
// codebook, laid out and described exactly as aff-quantize writes them (formats/container.md
// §5.1), so Model::load, aff-run and the GPU model load the file unchanged. The bytes are a
// pure function of the options (every tensor has its own generator seeded from the seed and
// its name), independent of the thread count. With `mtp` the file also holds the MTP layer
// (mtp.0.*: e_proj, h_proj, its norms and hyper head, one sliding-window layer with its
// routed experts), as a checkpoint with MTP tensors quantised into one container would.
// With `dspark` the config gets V4-Flash-0731's dspark_* keys (taps: the container's last
// three layers) and a draft container is written beside it (dspark_path: OUT.dspark.aff, what
// load_model_with_draft finds beside OUT.aff) as aff-quantize --dspark --codebook OUT.aff
// writes one: metadata role "draft", the same config and codebook id, the three DSpark stages
// mtp.0..2 (model doc §2.5: sliding layers with learned routers and their codebook-stored
// experts, main_proj/main_norm on the first, norm, hyper head, Markov and confidence heads on
// the last).
#pragma once

#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

struct GeometryContainerOptions {
    std::string out_path;
    std::uint32_t layers = 2;        // first N layers of the 43 (1..43)
    std::uint32_t experts = 256;     // routed experts a layer (>= num_experts_per_tok = 6)
    std::uint32_t vocab = 129280;    // embedding and head rows (smaller for small test files)
    std::uint64_t seed = 1;
    bool mtp = false;                // also the MTP layer mtp.0 (§5.1: a sliding layer, its projections, experts)
    bool dspark = false;             // also the draft container of three DSpark stages (§5.2); not with mtp
    std::string tool;                // provenance "tool"
    std::string created;             // provenance "created" (empty: left empty, for reproducible files)
    // Routing skew. Random gate weights route near uniformly, which no expert cache can exploit;
    // with zipf_s > 0 each learned-routing layer's gate.bias (which, as in V4, steers the
    // selection and not the weights) is scale · ln(E · P(rank(e))), P the Zipf-like popularity
    //   P(r) = (1 − floor) · (r + 1)^−s / Σ + floor / E,  s = zipf_s ± zipf_s_spread per layer,
    // over a per-layer random ranking of the experts (drawn from the seed). Were the experts'
    // scores for a token Gumbel-distributed with scale `scale`, a token's first choice would
    // follow P exactly (Gumbel-max); sqrt(softplus) of the unit-variance logits these gates
    // give has a spread of 0.28 (a Gumbel of that spread has scale 0.22, the default). The
    // real scores' tails are lighter, so the measured popularity differs: benchmarks report
    // the hit rates they measure. The hash-routed layers keep their random tid2eid tables
    // (their skew comes from the token stream, as in libaff/trace/synthetic.hpp). 0: none.
    double zipf_s = 0, zipf_s_spread = 0, floor = 0.15, skew_scale = 0.22;
};

struct GeometryContainerReport {
    std::uint64_t dense_tensors = 0, dense_bytes = 0;
    std::uint64_t experts = 0, expert_bytes = 0;
    std::uint64_t file_bytes = 0;    // both files' with dspark
    std::string draft_path;          // the draft container written (dspark), else empty
};

// Where the draft container of `out_path` goes: its name without ".aff", then ".dspark.aff".
std::string dspark_path(const std::string& out_path);

// The config.json of DeepSeek-V4-Flash (model doc §1.2, official field names).
nlohmann::json deepseek_v4_flash_config();

// The gate.bias a learned layer gets under the options' routing skew (zipf_s > 0): expert
// ranking[r] gets skew_scale · ln(E · P(r)), the per-layer exponent and ranking drawn from
// the seed and the layer.
std::vector<float> skewed_router_bias(const GeometryContainerOptions& options, int layer, std::uint64_t experts);

// Throws aff::Error: usage for options out of range, io naming the file.
GeometryContainerReport write_geometry_container(const GeometryContainerOptions& options, ThreadPool& pool,
                                                 Progress& progress);

}  // namespace aff::quant
