// A random V4 checkpoint re-saved as transformers' save_pretrained writes one: the names of
// DeepseekV4ForCausalLM's state dict ("model." prefix, self_attn / mlp, fused experts
// gate_up_proj [E, 2I, D] and down_proj [E, D, I]) and every float weight in BF16. The official
// FP8 (E4M3 × E8M0 per 128 × 128 block) and FP4 (E2M1 × E8M0 per 32) weights decode to values a
// BF16 holds exactly (3 and 1 mantissa bits times a power of two), so the re-saved checkpoint is
// the same function, value for value: the sweep's golden logits apply to it unchanged. The name
// rules are those tests/oracle/v4_checkpoint_io.py loads transformers with (every state-dict key
// checked there on the device); libaff/checkpoint/tensor_names.cpp maps them back.
#pragma once

#include "random_safetensors.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aff::test {

namespace transformers_detail {

inline float bf16_value(const std::string& b, std::size_t i) {
    std::uint16_t h;
    std::memcpy(&h, &b[i * 2], 2);
    const std::uint32_t u = std::uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline float e4m3(std::uint8_t b) {
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 0) return sign * std::ldexp(float(m) / 8.0f, -6);
    return sign * std::ldexp(1.0f + float(m) / 8.0f, e - 7);
}

inline float e2m1(int code) {
    static const float v[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    return (code & 8) ? -v[code & 7] : v[code & 7];
}

inline float e8m0(std::uint8_t b) { return std::ldexp(1.0f, int(b) - 127); }

// Exact for the values decoded here (asserted: a value BF16 cannot hold is a bug in the premise).
inline void put_bf16(std::string& out, std::size_t i, float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    if (u & 0xFFFF) throw std::logic_error("transformers_checkpoint: a decoded weight is not a BF16 value");
    const std::uint16_t h = std::uint16_t(u >> 16);
    std::memcpy(&out[i * 2], &h, 2);
}

// A float weight as BF16 bytes [rows, cols] (rows × cols elements of the logical matrix).
inline std::string as_bf16(const RandomSafetensors::Tensor& t, const RandomSafetensors::Tensor* scale) {
    if (t.dtype == "BF16") return t.bytes;
    const std::size_t rows = t.shape[0];
    if (t.dtype == "F8_E4M3") {
        const std::size_t cols = t.shape[1], bc = scale->shape[1];
        std::string out(rows * cols * 2, '\0');
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c)
                put_bf16(out, r * cols + c,
                         e4m3(std::uint8_t(t.bytes[r * cols + c])) * e8m0(std::uint8_t(scale->bytes[(r / 128) * bc + c / 128])));
        return out;
    }
    if (t.dtype == "I8") {  // FP4: two codes a byte, the even column in the low nibble
        const std::size_t cols = t.shape[1] * 2, sc = scale->shape[1];
        std::string out(rows * cols * 2, '\0');
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c) {
                const std::uint8_t b = std::uint8_t(t.bytes[r * (cols / 2) + c / 2]);
                const int code = (c & 1) ? b >> 4 : b & 15;
                put_bf16(out, r * cols + c, e2m1(code) * e8m0(std::uint8_t(scale->bytes[r * sc + c / 32])));
            }
        return out;
    }
    throw std::logic_error("transformers_checkpoint: no BF16 form for dtype " + t.dtype);
}

inline const std::map<std::string, std::string>& global_names() {
    static const std::map<std::string, std::string> m = {
        {"embed.weight", "model.embed_tokens.weight"}, {"head.weight", "lm_head.weight"},
        {"norm.weight", "model.norm.weight"},          {"hc_head_fn", "model.hc_head.hc_fn"},
        {"hc_head_base", "model.hc_head.hc_base"},     {"hc_head_scale", "model.hc_head.hc_scale"}};
    return m;
}

inline const std::map<std::string, std::string>& layer_names() {
    static const std::map<std::string, std::string> m = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"hc_attn_fn", "attn_hc.fn"}, {"hc_attn_base", "attn_hc.base"}, {"hc_attn_scale", "attn_hc.scale"},
        {"hc_ffn_fn", "ffn_hc.fn"}, {"hc_ffn_base", "ffn_hc.base"}, {"hc_ffn_scale", "ffn_hc.scale"},
        {"attn.attn_sink", "self_attn.sinks"},
        {"attn.wq_a.weight", "self_attn.q_a_proj.weight"},
        {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
        {"attn.wq_b.weight", "self_attn.q_b_proj.weight"},
        {"attn.wkv.weight", "self_attn.kv_proj.weight"},
        {"attn.kv_norm.weight", "self_attn.kv_norm.weight"},
        {"attn.wo_a.weight", "self_attn.o_a_proj.weight"},
        {"attn.wo_b.weight", "self_attn.o_b_proj.weight"},
        {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"},
        {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"},
        {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
        {"attn.compressor.ape", "self_attn.compressor.position_bias"},
        {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
        {"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
        {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
        {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
        {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
        {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
        {"ffn.gate.weight", "mlp.gate.weight"},
        {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
        {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
        {"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
        {"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
        {"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"}};
    return m;
}

}  // namespace transformers_detail

// `official` (a checkpoint under the official names, as write_v4_tensors makes it) under
// transformers' names, every float weight BF16, the routed experts of each layer fused.
inline RandomSafetensors transformers_named(const RandomSafetensors& official, int experts) {
    namespace d = transformers_detail;
    std::map<std::string, const RandomSafetensors::Tensor*> by_name;
    for (const auto& t : official.tensors()) by_name[t.name] = &t;
    auto scale_of = [&](const std::string& weight) -> const RandomSafetensors::Tensor* {
        auto it = by_name.find(weight.substr(0, weight.size() - 7) + ".scale");
        return it == by_name.end() ? nullptr : it->second;
    };
    auto bf16_of = [&](const RandomSafetensors::Tensor& t) {
        RandomSafetensors::Tensor out{t.name, t.dtype, t.shape, t.bytes};
        if (t.dtype == "I64") return out;
        const RandomSafetensors::Tensor* s = scale_of(t.name);
        out.bytes = d::as_bf16(t, s);
        if (t.dtype == "I8") out.shape[1] *= 2;
        out.dtype = "BF16";
        return out;
    };
    RandomSafetensors out(0);
    // Fused experts: layer -> the w1, w2, w3 of each expert in order.
    std::map<int, std::vector<std::array<RandomSafetensors::Tensor, 3>>> fused;
    for (const auto& t : official.tensors()) {
        const std::string& n = t.name;
        if (n.size() > 6 && n.ends_with(".scale")) continue;  // folded into its weight
        if (auto g = d::global_names().find(n); g != d::global_names().end()) {
            auto b = bf16_of(t);
            b.name = g->second;
            out.put(std::move(b));
            continue;
        }
        if (!n.starts_with("layers.")) throw std::logic_error("transformers_named: unexpected tensor " + n);
        const std::size_t dot = n.find('.', 7);
        const int layer = std::stoi(n.substr(7, dot - 7));
        const std::string rest = n.substr(dot + 1);
        if (rest.starts_with("ffn.experts.")) {
            const std::size_t e0 = 12, e1 = rest.find('.', e0);
            const int e = std::stoi(rest.substr(e0, e1 - e0));
            const int which = rest[e1 + 2] - '1';  // "w1" / "w2" / "w3"
            auto& v = fused[layer];
            if (v.size() < std::size_t(experts)) v.resize(std::size_t(experts));
            v[std::size_t(e)][std::size_t(which)] = bf16_of(t);
            continue;
        }
        auto r = d::layer_names().find(rest);
        if (r == d::layer_names().end()) throw std::logic_error("transformers_named: no rule for " + n);
        auto b = bf16_of(t);
        b.name = "model.layers." + std::to_string(layer) + "." + r->second;
        out.put(std::move(b));
    }
    for (auto& [layer, ex] : fused) {
        const std::uint64_t I = ex[0][0].shape[0], D = ex[0][0].shape[1];
        RandomSafetensors::Tensor gate_up{"model.layers." + std::to_string(layer) + ".mlp.experts.gate_up_proj", "BF16",
                                          {ex.size(), 2 * I, D}, ""};
        RandomSafetensors::Tensor down{"model.layers." + std::to_string(layer) + ".mlp.experts.down_proj", "BF16",
                                       {ex.size(), D, I}, ""};
        for (const auto& e : ex) {
            gate_up.bytes += e[0].bytes;  // w1 rows, then w3 rows
            gate_up.bytes += e[2].bytes;
            down.bytes += e[1].bytes;
        }
        out.put(std::move(gate_up));
        out.put(std::move(down));
    }
    return out;
}

}  // namespace aff::test
