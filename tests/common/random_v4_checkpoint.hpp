// A random DeepSeek-V4 checkpoint of a given geometry (official tensor names, config.json with
// layer_types, hash layers and both RoPE tables), for the programs that need a model but must
// not commit one: the serve tests' random tiny model (tests/serve/make_random_model.cpp) and
// the GPU container test's wide checkpoint (tests/gpu/container_forward_test.cpp). The bytes
// are a pure function of the seed, the geometry and dense_fp8 (RandomSafetensors draws in call
// order, and the tensors are written in one fixed order). Header-only, as random_safetensors.hpp.
#pragma once

#include "random_safetensors.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace aff::test {

struct V4Geometry {
    int vocab = 0, hidden = 0, heads = 0, head_dim = 0, rope_dim = 0, q_lora_rank = 0, o_groups = 0,
        o_lora_rank = 0, window = 0;
    int index_heads = 0, index_head_dim = 0, index_topk = 0, experts = 0, experts_per_token = 0, expert_width = 0,
        hc = 0;
    std::vector<std::string> layer_types;  // sliding_attention, compressed_sparse_attention, ...
    std::vector<bool> hash;                // per layer: routed by the token-id table
    // Knobs the config sweep (v4_sweep.hpp) varies; the defaults are what the fixed-geometry
    // users (serve tests, GPU container test) have always written.
    int hca_ratio = 16;
    double swiglu_limit = 10.0, routed_scaling = 1.5;
    int sinkhorn_iters = 20;
    double compress_theta = 160000.0, yarn_factor = 16.0;
    bool fp4_experts = false;  // routed experts as packed FP4 with E8M0 per-32 scales, else BF16
};

// config.json: CSA ratio 4, the geometry's HCA ratio (16 unless set), V4-Flash's RoPE, sinkhorn and
// routing constants unless the geometry sets others.
inline nlohmann::json v4_config(const V4Geometry& g) {
    const double rotary = double(g.rope_dim) / g.head_dim;
    nlohmann::json c = {
        {"architectures", {"DeepseekV4ForCausalLM"}}, {"model_type", "deepseek_v4"}, {"vocab_size", g.vocab},
        {"hidden_size", g.hidden}, {"num_hidden_layers", int(g.layer_types.size())},
        {"num_attention_heads", g.heads}, {"num_key_value_heads", 1}, {"head_dim", g.head_dim},
        {"qk_rope_head_dim", g.rope_dim}, {"partial_rotary_factor", rotary}, {"q_lora_rank", g.q_lora_rank},
        {"o_groups", g.o_groups}, {"o_lora_rank", g.o_lora_rank}, {"sliding_window", g.window},
        {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", g.hca_ratio}}},
        {"index_n_heads", g.index_heads}, {"index_head_dim", g.index_head_dim}, {"index_topk", g.index_topk},
        {"n_routed_experts", g.experts}, {"num_experts_per_tok", g.experts_per_token}, {"n_shared_experts", 1},
        {"moe_intermediate_size", g.expert_width}, {"routed_scaling_factor", g.routed_scaling}, {"swiglu_limit", g.swiglu_limit},
        {"norm_topk_prob", true}, {"scoring_func", "sqrtsoftplus"}, {"hidden_act", "silu"}, {"hc_mult", g.hc},
        {"hc_sinkhorn_iters", g.sinkhorn_iters}, {"hc_eps", 1e-6}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
        {"compress_rope_theta", g.compress_theta}, {"max_position_embeddings", 4096}, {"num_nextn_predict_layers", 0},
        {"tie_word_embeddings", false}, {"bos_token_id", 0}, {"eos_token_id", 1}, {"torch_dtype", "bfloat16"}};
    c["layer_types"] = nlohmann::json::array();
    c["mlp_layer_types"] = nlohmann::json::array();
    for (std::size_t i = 0; i < g.layer_types.size(); ++i) {
        c["layer_types"].push_back(g.layer_types[i]);
        c["mlp_layer_types"].push_back(g.hash[i] ? "hash_moe" : "moe");
    }
    c["rope_parameters"] = {
        {"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", rotary}}},
        {"compress",
         {{"rope_type", "yarn"}, {"rope_theta", g.compress_theta}, {"factor", g.yarn_factor}, {"original_max_position_embeddings", 65536},
          {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"attention_factor", 1.0}, {"partial_rotary_factor", rotary}}}};
    return c;
}

// One mHC site's (or hyper head's) fn, base and scale under prefix p.
inline void write_hyper(RandomSafetensors& w, const V4Geometry& g, const std::string& p, const std::string& site,
                        int rows) {
    w.bf16(p + "hc_" + site + "_fn", {std::uint64_t(rows), std::uint64_t(g.hc * g.hidden)}, 0.0f, 0.05f);
    w.bf16(p + "hc_" + site + "_base", {std::uint64_t(rows)}, 0.0f, 0.5f);
    w.bf16(p + "hc_" + site + "_scale", {std::uint64_t(site == "head" ? 1 : 3)}, 0.5f, 0.25f);
}

// One decoder layer's tensors under prefix p ("layers.3.", "mtp.0."): attention of `type`, MoE
// routed by token id when `hash`, else learned with a bias. lin writes a dense linear.
template <class Lin>
void write_v4_layer(RandomSafetensors& w, const V4Geometry& g, const std::string& p, const std::string& type, bool hash,
                    Lin& lin) {
    const int D = g.hidden, HC = g.hc, H = g.heads, Dh = g.head_dim, E = g.experts, I = g.expert_width;
    auto hyper = [&](const std::string& site, int rows) { write_hyper(w, g, p, site, rows); };
    auto compressor = [&](const std::string& q, int ratio, int dim, bool overlap) {
        const int width = overlap ? 2 * dim : dim;
        lin(q + "wkv.weight", width, D);
        lin(q + "wgate.weight", width, D);
        w.bf16(q + "ape", {std::uint64_t(ratio), std::uint64_t(width)}, 0.0f, 0.5f);
        w.bf16(q + "norm.weight", {std::uint64_t(dim)}, 1.0f, 0.1f);
    };
    w.bf16(p + "attn_norm.weight", {std::uint64_t(D)}, 1.0f, 0.1f);
    w.bf16(p + "ffn_norm.weight", {std::uint64_t(D)}, 1.0f, 0.1f);
    hyper("attn", (2 + HC) * HC);
    hyper("ffn", (2 + HC) * HC);
    const std::string a = p + "attn.";
    w.bf16(a + "attn_sink", {std::uint64_t(H)}, 0.0f, 1.0f);
    lin(a + "wq_a.weight", g.q_lora_rank, D);
    w.bf16(a + "q_norm.weight", {std::uint64_t(g.q_lora_rank)}, 1.0f, 0.1f);
    lin(a + "wq_b.weight", H * Dh, g.q_lora_rank);
    lin(a + "wkv.weight", Dh, D);
    w.bf16(a + "kv_norm.weight", {std::uint64_t(Dh)}, 1.0f, 0.1f);
    lin(a + "wo_a.weight", g.o_groups * g.o_lora_rank, H * Dh / g.o_groups);
    lin(a + "wo_b.weight", D, g.o_groups * g.o_lora_rank);
    if (type != "sliding_attention") {
        const bool csa = type == "compressed_sparse_attention";
        compressor(a + "compressor.", csa ? 4 : g.hca_ratio, Dh, csa);
        if (csa) {
            lin(a + "indexer.wq_b.weight", g.index_heads * g.index_head_dim, g.q_lora_rank);
            lin(a + "indexer.weights_proj.weight", g.index_heads, D);
            compressor(a + "indexer.compressor.", 4, g.index_head_dim, true);
        }
    }
    const std::string f = p + "ffn.";
    lin(f + "gate.weight", E, D);
    if (hash) w.tid2eid(f + "gate.tid2eid", g.vocab, g.experts_per_token, E);
    else w.bf16(f + "gate.bias", {std::uint64_t(E)}, 0.0f, 0.1f);
    lin(f + "shared_experts.w1.weight", I, D);
    lin(f + "shared_experts.w2.weight", D, I);
    lin(f + "shared_experts.w3.weight", I, D);
    for (int e = 0; e < E; ++e) {
        const std::string q = f + "experts." + std::to_string(e) + ".";
        auto expert = [&](const std::string& name, int rows, int cols) {
            if (g.fp4_experts) w.matrix_fp4(name, rows, cols);
            else w.matrix(name, rows, cols);
        };
        expert(q + "w1.weight", I, D);
        expert(q + "w2.weight", D, I);
        expert(q + "w3.weight", I, D);
    }
}

// Every tensor of the model into w, scaled so activations stay O(1). The dense linears
// (attention, compressors, indexer, gate, shared expert) are FP8 with block scales when
// dense_fp8, else BF16; routed experts are FP4 when the geometry says so, else BF16; embedding
// and head are always BF16. Returns how many linears are FP8.
inline int write_v4_tensors(RandomSafetensors& w, const V4Geometry& g, bool dense_fp8) {
    const int D = g.hidden;
    int fp8 = 0;
    auto lin = [&](const std::string& name, int rows, int cols) {
        if (dense_fp8) {
            w.matrix_fp8(name, rows, cols);
            ++fp8;
        } else {
            w.matrix(name, rows, cols);
        }
    };
    w.bf16("embed.weight", {std::uint64_t(g.vocab), std::uint64_t(D)}, 0.0f, 1.0f);
    w.matrix("head.weight", g.vocab, D);
    w.bf16("norm.weight", {std::uint64_t(D)}, 1.0f, 0.1f);
    write_hyper(w, g, "", "head", g.hc);
    for (std::size_t l = 0; l < g.layer_types.size(); ++l)
        write_v4_layer(w, g, "layers." + std::to_string(l) + ".", g.layer_types[l], g.hash[l], lin);
    return fp8;
}

// A DSpark drafter (model doc §2.5, §8.1's DSpark variant): the dspark_* keys added to a
// config (taps: the trunk's last three layers unless given), and its tensors: `stages`
// sliding-only layers mtp.0 .. with learned routing, mtp.0.main_proj / main_norm, and on the
// last stage norm, hc_head_*, markov_head.markov_w{1,2} and confidence_head.proj. Dense linears
// BF16 (FP8 with dense_fp8), the heads BF16.
struct DsparkGeometry {
    int stages = 3, block_size = 5, markov_rank = 16, noise_token_id = -1;  // -1: vocab - 1
    std::vector<int> taps;                                                  // empty: the last three layers
};

inline std::vector<int> dspark_taps(const V4Geometry& g, const DsparkGeometry& d) {
    if (!d.taps.empty()) return d.taps;
    std::vector<int> t;
    for (int l = std::max(0, int(g.layer_types.size()) - 3); l < int(g.layer_types.size()); ++l) t.push_back(l);
    return t;
}

inline void add_dspark_config(nlohmann::json& c, const V4Geometry& g, const DsparkGeometry& d) {
    c["dspark_block_size"] = d.block_size;
    c["dspark_noise_token_id"] = d.noise_token_id < 0 ? g.vocab - 1 : d.noise_token_id;
    c["dspark_target_layer_ids"] = dspark_taps(g, d);
    c["dspark_markov_rank"] = d.markov_rank;
    c["num_nextn_predict_layers"] = 1;  // as V4-Flash-0731's config says, although it has 3 stages
    // The official form's per-layer ratios too, one 0 per stage after the trunk's (-0731's 46
    // entries): containers count draft stages from them (formats/container.md §8). The
    // transformers-form layer_types still decide the trunk's kinds.
    nlohmann::json ratios = nlohmann::json::array();
    for (const std::string& t : g.layer_types)
        ratios.push_back(t == "sliding_attention" ? 0 : t == "compressed_sparse_attention" ? 4 : g.hca_ratio);
    for (int s = 0; s < d.stages; ++s) ratios.push_back(0);
    c["compress_ratios"] = ratios;
}

inline void write_dspark_tensors(RandomSafetensors& w, const V4Geometry& g, const DsparkGeometry& d, bool dense_fp8) {
    const int D = g.hidden, taps = int(dspark_taps(g, d).size()), r = d.markov_rank;
    auto lin = [&](const std::string& name, int rows, int cols) {
        if (dense_fp8) w.matrix_fp8(name, rows, cols);
        else w.matrix(name, rows, cols);
    };
    lin("mtp.0.main_proj.weight", D, taps * D);
    w.bf16("mtp.0.main_norm.weight", {std::uint64_t(D)}, 1.0f, 0.1f);
    for (int s = 0; s < d.stages; ++s)
        write_v4_layer(w, g, "mtp." + std::to_string(s) + ".", "sliding_attention", false, lin);
    const std::string last = "mtp." + std::to_string(d.stages - 1) + ".";
    w.bf16(last + "norm.weight", {std::uint64_t(D)}, 1.0f, 0.1f);
    write_hyper(w, g, last, "head", g.hc);
    w.bf16(last + "markov_head.markov_w1.weight", {std::uint64_t(g.vocab), std::uint64_t(r)}, 0.0f, 1.0f);
    w.matrix(last + "markov_head.markov_w2.weight", g.vocab, r);
    w.matrix(last + "confidence_head.proj.weight", 1, D + r);
}

}  // namespace aff::test
