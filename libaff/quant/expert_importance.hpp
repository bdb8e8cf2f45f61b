// Which imatrix tensor weighs which routed-expert matrix when aff-quantize quantises a
// checkpoint. llama.cpp records the inputs of each expert matrix: gate (w1) and up
// (w3) see the same layer input, so either serves both when only one is present; down
// (w2) has its own. Every tensor that is used is checked against the checkpoint's
// geometry before any work starts (a clear error naming the tensor); tensors that
// name no DeepSeek-V4 matrix at all are listed so the tool can warn about them.
#pragma once

#include "libaff/quant/imatrix.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

struct ExpertGeometry {
    std::uint32_t layers = 0;        // main layers being quantised
    std::uint32_t source_layers = 0; // main layers of the checkpoint (>= layers)
    std::uint32_t experts = 0;       // routed experts a layer
    std::uint64_t hidden = 0;        // w1/w3 columns
    std::uint64_t intermediate = 0;  // w2 columns
};

struct ExpertImportance {
    // Per main layer, the entries weighing w1, w2, w3 (nullptr: no data).
    std::vector<std::array<const ImatrixEntry*, 3>> by_layer;
    std::vector<std::string> unused;     // tensors that name no matrix of a DeepSeek-V4 checkpoint (warn)
    // DeepSeek-V4 matrices llama-imatrix records that are no trunk routed expert
    // (attention, shared expert, router, the MTP block): expected, skipped silently.
    std::size_t other_tensors = 0;
    std::vector<int> skipped_layers;     // expert tensors of layers cut by --layers
    std::vector<std::uint32_t> missing_layers;  // layers with no data for any of their matrices

    // E[x²] per input column for matrix `which` (0 = w1, 1 = w2, 2 = w3) of an expert;
    // empty when there is none (no tensor, or the calibration never routed to it).
    std::vector<float> importance(const Imatrix& imatrix, std::uint32_t layer, std::uint32_t expert, int which,
                                  const ExpertGeometry& g) const;
};

// Throws a format error naming the imatrix file and tensor when a tensor's columns or
// expert count disagree with the checkpoint, or one matrix is described twice.
ExpertImportance match_imatrix(const Imatrix& imatrix, const ExpertGeometry& geometry);

}  // namespace aff::quant
