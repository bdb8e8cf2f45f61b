// Parsing of canonical tensor names (see tensor_names.hpp).
#include "libaff/container/tensor_names.hpp"

namespace aff {
namespace {

// Parses a decimal index at the front of s up to the next '.', no leading zeros, fits u32.
bool take_index(std::string_view& s, std::uint32_t& out) {
    std::size_t i = 0;
    std::uint64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
        if (v > 0xFFFFFFFFull) return false;
        ++i;
    }
    if (i == 0 || (i > 1 && s[0] == '0')) return false;
    out = static_cast<std::uint32_t>(v);
    s.remove_prefix(i);
    return true;
}

bool take(std::string_view& s, std::string_view prefix) {
    if (s.substr(0, prefix.size()) != prefix) return false;
    s.remove_prefix(prefix.size());
    return true;
}

}  // namespace

std::string expert_prefix(const ExpertKey& key) {
    return (key.draft ? "mtp." : "layers.") + std::to_string(key.layer) + ".ffn.experts." + std::to_string(key.expert);
}

std::optional<LayerRef> layer_of_tensor(std::string_view name) {
    LayerRef ref;
    if (take(name, "layers.")) ref.draft = false;
    else if (take(name, "mtp.")) ref.draft = true;
    else return std::nullopt;
    if (!take_index(name, ref.index) || !take(name, ".") || name.empty()) return std::nullopt;
    return ref;
}

std::optional<ExpertKey> expert_of_tensor(std::string_view name) {
    ExpertKey key;
    if (take(name, "layers.")) key.draft = false;
    else if (take(name, "mtp.")) key.draft = true;
    else return std::nullopt;
    if (!take_index(name, key.layer) || !take(name, ".ffn.experts.") || !take_index(name, key.expert) ||
        !take(name, ".") || name.empty())
        return std::nullopt;
    return key;
}

std::string_view to_string(TensorClass c) {
    switch (c) {
        case TensorClass::routed_expert: return "routed_expert";
        case TensorClass::dense: return "dense";
        case TensorClass::embedding_head: return "embedding_head";
        case TensorClass::draft: return "draft";
    }
    return "dense";
}

TensorClass classify_tensor(std::string_view name) {
    if (name.substr(0, 4) == "mtp.") return TensorClass::draft;
    if (expert_of_tensor(name)) return TensorClass::routed_expert;
    if (name == "embed.weight" || name == "head.weight") return TensorClass::embedding_head;
    return TensorClass::dense;
}

}  // namespace aff
