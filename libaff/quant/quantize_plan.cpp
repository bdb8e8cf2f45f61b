// Planning a quantisation run from tensor names (quantize_plan.hpp).
#include "libaff/quant/quantize_plan.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace aff::quant {

StorageType storage_type_of(DType dtype, const std::string& tensor) {
    switch (dtype) {
        case DType::f32: return StorageType::F32;
        case DType::f16: return StorageType::F16;
        case DType::bf16: return StorageType::BF16;
        case DType::i64: return StorageType::I64;
        case DType::i32: return StorageType::I32;
        case DType::i8: return StorageType::I8;
        case DType::u8: return StorageType::U8;
        case DType::f8_e4m3: return StorageType::F8_E4M3;
        case DType::f8_e8m0: return StorageType::F8_E8M0;
        case DType::boolean: break;
    }
    throw_unsupported("tensor " + tensor + ": dtype " + std::string(dtype_name(dtype)) +
                      " has no container storage type");
}

std::string expert_matrix_name(const ExpertKey& key, int which) {
    static const char* kNames[3] = {".w1.weight", ".w2.weight", ".w3.weight"};
    return expert_prefix(key) + kNames[which];
}

QuantizePlan plan_quantization(const Checkpoint& ck, const PlanGeometry& g) {
    const std::string& src = ck.tensor_source();
    // Group key: -1 for global tensors, else the layer (or draft stage) index.
    std::map<std::int64_t, std::vector<std::string>> dense;
    std::map<std::int64_t, std::set<std::uint32_t>> experts;
    bool any_draft = false;
    for (const std::string& name : ck.names()) {
        const auto layer = layer_of_tensor(name);
        if (layer && layer->draft) any_draft = true;
        if (g.draft ? !(layer && layer->draft) : (layer && layer->draft)) continue;
        if (layer && !layer->draft && layer->index >= g.source_layers)
            throw_format("tensor " + name + ": layer " + std::to_string(layer->index) +
                             " is out of range (config num_hidden_layers = " + std::to_string(g.source_layers) + ")",
                         src);
        if (layer && !layer->draft && layer->index >= g.layers) continue;  // cut by --layers
        const std::int64_t group = layer ? static_cast<std::int64_t>(layer->index) : -1;
        if (const auto key = expert_of_tensor(name)) {
            const std::string rest = name.substr(expert_prefix(*key).size() + 1);
            static const std::set<std::string> known = {"w1.weight", "w1.scale", "w2.weight",
                                                        "w2.scale",  "w3.weight", "w3.scale"};
            if (!known.count(rest))
                throw_unsupported("tensor " + name + ": unknown routed-expert tensor (expected w1/w2/w3 weight or scale)",
                                  src);
            if (key->expert >= g.experts)
                throw_format("tensor " + name + ": expert " + std::to_string(key->expert) +
                                 " is out of range (config n_routed_experts = " + std::to_string(g.experts) + ")",
                             src);
            experts[group].insert(key->expert);
            continue;
        }
        dense[group].push_back(name);
    }
    if (g.draft && !any_draft)
        throw_format("no mtp.* tensors: the checkpoint has no MTP or draft stages to write", src);
    if (!g.draft)  // every main layer has all its routed experts
        for (std::uint32_t l = 0; l < g.layers; ++l)
            for (std::uint32_t e = 0; e < g.experts; ++e) experts[l].insert(e);

    QuantizePlan plan;
    std::set<std::int64_t> groups;
    for (const auto& [gk, v] : dense) groups.insert(gk);
    for (const auto& [gk, v] : experts) groups.insert(gk);
    const std::uint64_t per_expert = 3 * g.hidden * g.intermediate;
    for (std::int64_t gk : groups) {
        for (const std::string& name : dense[gk]) {
            const TensorView& v = ck.tensor(name);
            (void)storage_type_of(v.dtype, name);
            if (v.shape.size() > 4)
                throw_unsupported("tensor " + name + ": rank " + std::to_string(v.shape.size()) + " is above 4", v.file);
            plan.dense_bytes += v.nbytes;
            plan.items.push_back({false, name, {}});
        }
        for (std::uint32_t e : experts[gk]) {
            const ExpertKey key{g.draft, static_cast<std::uint32_t>(gk), e};
            for (int which = 0; which < 3; ++which) (void)ck.tensor(expert_matrix_name(key, which));  // present?
            plan.items.push_back({true, expert_prefix(key), key});
            ++plan.expert_count;
            plan.expert_weights += per_expert;
        }
    }
    return plan;
}

}  // namespace aff::quant
