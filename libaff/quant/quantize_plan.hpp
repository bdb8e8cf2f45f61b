// What aff-quantize writes, and in which order, decided from the checkpoint's tensor
// names alone before any byte is read: the main container gets every tensor of the
// kept main layers and the global ones, the draft container the mtp.* stages
// (formats/container.md §5.1). Routed experts (w1/w2/w3 with their scales) become
// one quantised extent each; everything else is copied as stored. Order: global
// tensors, then each layer (or draft stage) in numeric order, its other tensors by
// name, then its experts by index; so the output never depends on hash-map order.
#pragma once

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/storage_type.hpp"
#include "libaff/container/tensor_names.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

struct PlanItem {
    bool expert = false;
    std::string name;  // dense: the canonical tensor name; expert: expert_prefix(key)
    ExpertKey key;     // when expert
};

struct QuantizePlan {
    std::vector<PlanItem> items;  // in write order
    std::uint64_t expert_count = 0;
    std::uint64_t expert_weights = 0;  // routed weights to quantise (for progress)
    std::uint64_t dense_bytes = 0;     // bytes copied verbatim
};

struct PlanGeometry {
    std::uint32_t layers = 0;         // main layers to keep (of the config's num_hidden_layers)
    std::uint32_t source_layers = 0;  // the config's num_hidden_layers
    std::uint32_t experts = 0;        // n_routed_experts
    std::uint64_t hidden = 0, intermediate = 0;
    bool draft = false;               // plan the mtp.* stages instead of the trunk
};

// Throws aff::Error naming the tensor (and the checkpoint's tensor source): a
// routed-expert tensor that is not w1/w2/w3 .weight/.scale, an expert or layer index
// out of the config's range, a missing expert matrix, a dtype with no storage type;
// for a draft, a checkpoint without mtp.* tensors.
QuantizePlan plan_quantization(const Checkpoint& checkpoint, const PlanGeometry& geometry);

// The container type of a tensor copied verbatim; throws unsupported for a dtype
// without one (BOOL).
StorageType storage_type_of(DType dtype, const std::string& tensor);

// "layers.3.ffn.experts.7.w1.weight" for matrix 0 (w1), 1 (w2), 2 (w3).
std::string expert_matrix_name(const ExpertKey& key, int which);

}  // namespace aff::quant
