// What a tensor's canonical name (the official DeepSeek names, e.g.
// "layers.3.ffn.experts.17.w1.weight", "mtp.0.ffn.experts.5.w2.scale") says about it:
// which routed expert it belongs to, which layer, and its class for size reports
// (formats/container.md §7). Pure string logic, shared by the reader, the writer and
// the tools.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aff {

// One routed expert: (layer, expert) of the main stack, or (stage, expert) of a
// draft/MTP layer "mtp.<stage>".
struct ExpertKey {
    bool draft = false;
    std::uint32_t layer = 0;  // main layer index, or the draft stage when draft
    std::uint32_t expert = 0;
    auto operator<=>(const ExpertKey&) const = default;
};

// "layers.3.ffn.experts.17" or "mtp.0.ffn.experts.5": the name prefix of its tensors.
std::string expert_prefix(const ExpertKey& key);
// The expert a tensor name belongs to, if it is "<expert prefix>.<rest>" with decimal
// indices without leading zeros; nullopt otherwise.
std::optional<ExpertKey> expert_of_tensor(std::string_view name);

// "layers.<i>." or "mtp.<j>." prefix; nullopt for global tensors.
struct LayerRef {
    bool draft = false;
    std::uint32_t index = 0;
};
std::optional<LayerRef> layer_of_tensor(std::string_view name);

enum class TensorClass { routed_expert, dense, embedding_head, draft };
std::string_view to_string(TensorClass c);  // "routed_expert", "dense", "embedding_head", "draft"

// Draft (mtp.*) first, then routed experts, then embed/head, then everything else.
TensorClass classify_tensor(std::string_view name);

}  // namespace aff
