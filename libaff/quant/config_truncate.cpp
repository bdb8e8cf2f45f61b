// Cutting a config.json to its first N main layers (config_truncate.hpp).
#include "libaff/quant/config_truncate.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff::quant {

nlohmann::json truncate_config(const nlohmann::json& config, std::uint32_t layers, const std::string& path) {
    auto it = config.find("num_hidden_layers");
    if (it == config.end() || !it->is_number_unsigned())
        throw_format("field num_hidden_layers: missing or not a non-negative integer", path);
    const std::uint64_t old_layers = it->get<std::uint64_t>();
    if (layers == 0 || layers > old_layers)
        throw_usage("--layers " + std::to_string(layers) + " is out of range: the checkpoint has " +
                    std::to_string(old_layers) + " layers");
    nlohmann::json out = config;
    out["num_hidden_layers"] = layers;
    // Per-layer arrays: entries [layers, old_layers) go, the MTP tail stays.
    for (const char* key : {"layer_types", "mlp_layer_types", "compress_ratios"}) {
        auto a = out.find(key);
        if (a == out.end()) continue;
        if (!a->is_array()) throw_format(std::string("field ") + key + ": expected an array", path);
        if (a->size() < old_layers)
            throw_format(std::string("field ") + key + ": has " + std::to_string(a->size()) +
                             " entries, num_hidden_layers is " + std::to_string(old_layers),
                         path);
        a->erase(a->begin() + static_cast<std::ptrdiff_t>(layers), a->begin() + static_cast<std::ptrdiff_t>(old_layers));
    }
    if (auto h = out.find("num_hash_layers"); h != out.end()) {
        if (!h->is_number_unsigned()) throw_format("field num_hash_layers: expected a non-negative integer", path);
        *h = std::min<std::uint64_t>(h->get<std::uint64_t>(), layers);
    }
    return out;
}

}  // namespace aff::quant
