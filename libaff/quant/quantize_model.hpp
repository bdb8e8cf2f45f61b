// aff-quantize's work: a DeepSeek-V4 checkpoint directory in, an .aff container out
// (formats/container.md; routed experts in formats/quant-codebook.md's TQ2875/TQ2875R).
// Routed experts are dequantised exactly (FP4, FP8, BF16, F32) and quantised with the
// codebook, weighted by an imatrix's E[x²] when one is given; every other tensor is
// copied as stored. The main container holds the trunk, the draft container
// (`draft`) the mtp.* stages against the main container's codebook (§5.1 of the
// container spec). The file appears only when complete (ContainerWriter), and its
// bytes are a pure function of the inputs and options: no thread count, time or
// directory enters them (a creation time only when given: `created`).
#pragma once

#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/quantize_report.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace aff {
class Checkpoint;
}

namespace aff::quant {

struct QuantizeOptions {
    std::string src_dir;        // checkpoint: config.json + safetensors (+ tokenizer.json, chat template)
    std::string out_path;       // the container to write
    std::string imatrix_path;   // llama.cpp imatrix (GGUF or .dat); empty: none; ignored for a draft
    std::uint32_t layers = 0;   // keep the first N main layers; 0: all
    bool draft = false;         // write the mtp.* stages as a draft container
    std::string codebook_path;  // draft: the main container or a codebook file (required)
    MatrixOptions matrix;       // rotation policy and search passes
    std::string tool;           // provenance "tool", e.g. "aff-quantize 0.1.0"
    std::string created;        // provenance "created", RFC 3339 UTC (the caller decides the clock)
    // Checks the checkpoint against the config the container will carry before anything
    // is written (aff-quantize passes libaff/model's check_checkpoint_complete, which
    // this layer cannot call itself: the model sits above it). Null: not checked.
    std::function<void(const Checkpoint& checkpoint, const nlohmann::json& config)> check_complete;
};


// Throws aff::Error (usage for impossible options, io/format naming the file and
// tensor for bad inputs). Warnings (unused imatrix tensors, ignored imatrix) go to
// progress.note().
QuantizeReport quantize_checkpoint(const QuantizeOptions& options, ThreadPool& pool, Progress& progress);

// "2026-11-29T13:00:00Z" for seconds since the Unix epoch.
std::string rfc3339_utc(std::int64_t unix_seconds);
// The creation time to record: $SOURCE_DATE_EPOCH's when set (the reproducible-builds
// convention), else none (the empty string): the clock never enters the file, so two runs
// on the same inputs write the same bytes with nothing set. A value that is not a
// non-negative integer is a usage error.
std::string default_creation_time();

}  // namespace aff::quant
