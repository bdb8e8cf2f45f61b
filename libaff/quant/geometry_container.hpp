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
#pragma once

#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace aff::quant {

struct GeometryContainerOptions {
    std::string out_path;
    std::uint32_t layers = 2;        // first N layers of the 43 (1..43)
    std::uint32_t experts = 256;     // routed experts a layer (>= num_experts_per_tok = 6)
    std::uint32_t vocab = 129280;    // embedding and head rows (smaller for small test files)
    std::uint64_t seed = 1;
    bool mtp = false;                // also the MTP layer mtp.0 (§5.1: a sliding layer, its projections, experts)
    std::string tool;                // provenance "tool"
    std::string created;             // provenance "created" (empty: left empty, for reproducible files)
};

struct GeometryContainerReport {
    std::uint64_t dense_tensors = 0, dense_bytes = 0;
    std::uint64_t experts = 0, expert_bytes = 0;
    std::uint64_t file_bytes = 0;
};

// The config.json of DeepSeek-V4-Flash (model doc §1.2, official field names).
nlohmann::json deepseek_v4_flash_config();

// Throws aff::Error: usage for options out of range, io naming the file.
GeometryContainerReport write_geometry_container(const GeometryContainerOptions& options, ThreadPool& pool,
                                                 Progress& progress);

}  // namespace aff::quant
