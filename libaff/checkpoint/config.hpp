// The geometry and hyperparameters of a DeepSeek-V4 model, read from config.json and
// validated on load (model doc §1.2-1.4, §8.3): every error names the field. Both
// config forms are accepted: the official one (compress_ratios, num_hash_layers,
// qk_rope_head_dim, rope_theta + compress_rope_theta + rope_scaling) and the one
// transformers writes (layer_types + compress_rates, mlp_layer_types,
// partial_rotary_factor, rope_parameters {main, compress}). Nothing here is compiled in:
// the real model and the tiny test models differ only in these values.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace aff {

enum class AttentionKind { sliding, csa, hca };

struct RopeParameters {
    double theta = 10000.0;
    bool yarn = false;
    double factor = 1.0;
    double original_max_position = 0.0;
    double beta_fast = 32.0, beta_slow = 1.0;
    double attention_factor = 1.0;  // multiplies cos/sin (V4 uses 1: no mscale)
};

// The DSpark drafter's constants (model doc §1.2 dspark_* keys, §5.2): read whenever any
// dspark_* key is there; the doc's values stand in for keys left out (taps: the last three
// trunk layers, which are V4-Flash-0731's 40, 41, 42). Whether the stages themselves are in a
// checkpoint is the weights' business (dspark_stages_present, libaff/model/weights.hpp).
struct DsparkConfig {
    bool keys = false;             // any dspark_* key present
    int block_size = 5;            // γ: draft tokens of one block
    int noise_token_id = 128799;   // filler id of the block after the anchor
    std::vector<int> tap_layers;   // trunk layers whose outputs feed the drafter
    int markov_rank = 256;         // rank of the Markov transition head
};

struct ModelConfig {
    int vocab_size = 0;
    int hidden_size = 0;          // D
    int num_layers = 0;           // main stack
    int num_heads = 0;            // H
    int head_dim = 0;             // Dh
    int rope_dim = 0;             // Dr, trailing channels of every head
    int q_lora_rank = 0;          // Rq
    int o_groups = 0;             // G
    int o_lora_rank = 0;          // Ro
    int sliding_window = 0;       // W, includes the current token
    std::vector<AttentionKind> attention;  // per layer
    std::vector<int> compress_ratio;       // per layer; 0 for sliding
    std::vector<bool> hash_routed;         // per layer: route by tid2eid
    int index_heads = 0, index_head_dim = 0, index_topk = 0;
    int n_routed_experts = 0, n_shared_experts = 1, experts_per_token = 0, moe_intermediate_size = 0;
    bool norm_topk_prob = true;
    double routed_scaling_factor = 1.5;
    double swiglu_limit = 10.0;
    int hc_mult = 0, hc_sinkhorn_iters = 20;
    double hc_eps = 1e-6, rms_norm_eps = 1e-6;
    RopeParameters rope_main, rope_compress;
    std::int64_t max_position_embeddings = 0;
    int num_mtp_layers = 0;
    DsparkConfig dspark;
    int bos_token_id = 0;
    std::vector<int> eos_token_ids;
    bool tie_word_embeddings = false;

    int mix_width() const { return (2 + hc_mult) * hc_mult; }  // mHC fn rows
};

// Throws aff::Error (format) "<path>: field <name>: <problem>".
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& path);
ModelConfig load_model_config(const std::string& config_json_path);

}  // namespace aff
