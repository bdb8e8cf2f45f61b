// The config.json of a model cut to its first N main layers (aff-quantize --layers):
// num_hidden_layers becomes N and every per-layer array loses the entries of the
// dropped layers, keeping the entries past the old layer count (they describe the
// MTP / draft stages), so the result is a consistent, smaller model
// (formats/container.md §5.1). Pure JSON logic; the checks of the geometry itself
// stay in libaff/checkpoint/config.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace aff::quant {

// `config` must hold num_hidden_layers = L ≥ layers ≥ 1 (a format error naming `path`
// otherwise). Rewrites num_hidden_layers, layer_types, mlp_layer_types, compress_ratios
// and num_hash_layers; leaves every other member as it is.
nlohmann::json truncate_config(const nlohmann::json& config, std::uint32_t layers, const std::string& path);

}  // namespace aff::quant
