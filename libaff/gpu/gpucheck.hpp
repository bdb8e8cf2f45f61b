// aff-gpucheck's work: every GPU op run against its CPU twin on a model's real weights with
// random activations, then the whole GPU forward against the CPU reference forward on a short
// prompt (prefill and a few decode steps), then the same prompt on the model with its experts
// tiered (slab capped) against the all-resident run, bit for bit. One row per check: the op, what it ran on, the
// largest error relative to the output's scale (max |gpu − cpu| / max |cpu|; counts of
// mismatching indices for the selections), the threshold and pass/fail. The thresholds and
// why each holds are in gpucheck.cpp beside the checks. Declared in every build; in a build
// without GPU support run_gpucheck throws (unsupported) after checking the model file, so a
// bad file is reported as such everywhere.
#pragma once

#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace aff::gpu {

struct GpuCheckOptions {
    std::vector<int> layers;    // main layers to check op by op; empty: the first of each kind present
    int tokens = 4;             // activation rows per op (GEMVs in batches of at most 4) and prompt length
    int decode_steps = 3;       // greedy decode steps after the prompt (end to end)
    bool end_to_end = true;     // run the GpuModel-vs-Model comparison
    bool tiered = true;         // run the tiered-vs-all-resident comparison (a quarter of the experts in the slab)
    std::uint64_t seed = 1;     // activations, token ids and attention positions
    int device = 0;
};

struct GpuCheckRow {
    std::string op;             // "fp8_gemv", "attention", "forward", ...
    std::string what;           // layer, tensor, shape
    double error = 0.0;         // max relative error, or a count (mismatches)
    double threshold = 0.0;
    bool pass = false;
};

struct GpuCheckReport {
    std::string model;
    std::string device;         // "NVIDIA H200 (sm_90)"
    std::string forward;        // GpuModel::describe() of the end-to-end run
    std::vector<GpuCheckRow> rows;
    bool ok() const;
};

// Throws aff::Error: io/format naming the file when it is not a loadable model; unsupported
// when this build has no GPU support; device when no GPU is visible or a launch fails;
// usage for options out of range (a layer the model does not have, tokens < 1).
GpuCheckReport run_gpucheck(const std::string& model_path, const GpuCheckOptions& options, ThreadPool& pool,
                            Progress& progress);

// One line per row: op, what, error, threshold, PASS/FAIL; then a summary line.
void write_text(std::ostream& out, const GpuCheckReport& report);
// {"model", "device", "forward", "ok", "rows": [{"op", "what", "error", "threshold", "pass"}]}
void write_json(std::ostream& out, const GpuCheckReport& report);

}  // namespace aff::gpu
