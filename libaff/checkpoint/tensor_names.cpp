// Rename tables between transformers' and the official DeepSeek-V4 tensor names (see
// tensor_names.hpp; the correspondence is model doc §2.7, checked against what
// transformers 5.17 actually writes: tests/oracle/make_model_fixtures.py).
#include "libaff/checkpoint/tensor_names.hpp"

#include <cctype>
#include <string_view>
#include <utility>

namespace aff {

namespace {
struct Rename {
    std::string_view from, to;
};

// Whole-name renames of global tensors (after any "model." prefix is removed).
constexpr Rename global_renames[] = {
    {"embed_tokens.weight", "embed.weight"}, {"lm_head.weight", "head.weight"},
    {"hc_head.hc_fn", "hc_head_fn"},         {"hc_head.hc_base", "hc_head_base"},
    {"hc_head.hc_scale", "hc_head_scale"},
};

// Prefix renames of the part after "layers.N." / "mtp.N."; first match wins, so
// longer (more specific) prefixes come first.
constexpr Rename layer_renames[] = {
    {"input_layernorm.", "attn_norm."},
    {"post_attention_layernorm.", "ffn_norm."},
    {"attn_hc.fn", "hc_attn_fn"}, {"attn_hc.base", "hc_attn_base"}, {"attn_hc.scale", "hc_attn_scale"},
    {"ffn_hc.fn", "hc_ffn_fn"},   {"ffn_hc.base", "hc_ffn_base"},   {"ffn_hc.scale", "hc_ffn_scale"},
    {"self_attn.sinks", "attn.attn_sink"},
    {"self_attn.compressor.indexer.scorer.weights_proj.", "attn.indexer.weights_proj."},
    {"self_attn.compressor.indexer.q_b_proj.", "attn.indexer.wq_b."},
    {"self_attn.compressor.indexer.kv_proj.", "attn.indexer.compressor.wkv."},
    {"self_attn.compressor.indexer.gate_proj.", "attn.indexer.compressor.wgate."},
    {"self_attn.compressor.indexer.kv_norm.", "attn.indexer.compressor.norm."},
    {"self_attn.compressor.indexer.position_bias", "attn.indexer.compressor.ape"},
    {"self_attn.compressor.kv_proj.", "attn.compressor.wkv."},
    {"self_attn.compressor.gate_proj.", "attn.compressor.wgate."},
    {"self_attn.compressor.kv_norm.", "attn.compressor.norm."},
    {"self_attn.compressor.position_bias", "attn.compressor.ape"},
    {"self_attn.q_a_proj.", "attn.wq_a."},
    {"self_attn.q_a_norm.", "attn.q_norm."},
    {"self_attn.q_b_proj.", "attn.wq_b."},
    {"self_attn.kv_proj.", "attn.wkv."},
    {"self_attn.kv_norm.", "attn.kv_norm."},
    {"self_attn.o_a_proj.", "attn.wo_a."},
    {"self_attn.o_b_proj.", "attn.wo_b."},
    {"attn.norm.", "attn.kv_norm."},  // transformers' save_pretrained spelling of kv_norm
    {"mlp.gate.e_score_correction_bias", "ffn.gate.bias"},
    {"mlp.gate.", "ffn.gate."},
    {"mlp.shared_experts.gate_proj.", "ffn.shared_experts.w1."},
    {"mlp.shared_experts.up_proj.", "ffn.shared_experts.w3."},
    {"mlp.shared_experts.down_proj.", "ffn.shared_experts.w2."},
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Length of "layers.N." or "mtp.N." at the start of s, or 0.
std::size_t layer_prefix_length(std::string_view s) {
    std::size_t i;
    if (starts_with(s, "layers.")) i = 7;
    else if (starts_with(s, "mtp.")) i = 4;
    else return 0;
    const std::size_t digits = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == digits || i >= s.size() || s[i] != '.') return 0;
    return i + 1;
}
}  // namespace

CanonicalName canonical_tensor_name(const std::string& stored) {
    std::string name = stored;
    if (starts_with(name, "model.")) name.erase(0, 6);
    constexpr std::string_view inv = ".weight_scale_inv";
    if (name.size() > inv.size() && name.ends_with(inv)) name.replace(name.size() - inv.size(), inv.size(), ".scale");
    for (const Rename& r : global_renames)
        if (name == r.from) return {CanonicalName::Kind::plain, std::string(r.to)};
    const std::size_t p = layer_prefix_length(name);
    if (p == 0) return {CanonicalName::Kind::plain, name};
    const std::string prefix = name.substr(0, p);
    const std::string_view rest = std::string_view(name).substr(p);
    if (rest == "mlp.experts.gate_up_proj") return {CanonicalName::Kind::fused_gate_up, prefix + "ffn.experts."};
    if (rest == "mlp.experts.down_proj") return {CanonicalName::Kind::fused_down, prefix + "ffn.experts."};
    for (const Rename& r : layer_renames)
        if (starts_with(rest, r.from))
            return {CanonicalName::Kind::plain, prefix + std::string(r.to) + std::string(rest.substr(r.from.size()))};
    return {CanonicalName::Kind::plain, name};
}

}  // namespace aff
