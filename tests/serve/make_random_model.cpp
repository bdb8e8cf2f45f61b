// Writes a random tiny DeepSeek-V4 checkpoint with the real 129 280-token vocabulary, so
// the server, aff-run and the engine tests can drive the real tokenizer end to end
// without committing a large fixture. Geometry is tests/data/models/tiny-a's (model doc
// §8 layer order, CSA/HCA ratios, hash layers) at hidden size 32, no MTP layer; weights
// are BF16 drawn from a fixed-seed generator and scaled so activations stay O(1). The
// text it generates is noise: only the shape of the pipeline is being tested.
// The output is a pure function of the seed (about 24 MB; written in well under a second).
//     aff_make_random_model OUT_DIR [SEED]
// writes OUT_DIR/config.json and OUT_DIR/model.safetensors (official tensor names).
#include "../common/random_safetensors.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

constexpr int V = 129280, D = 32, L = 6, H = 4, Dh = 64, Dr = 32, Rq = 32, G = 2, Ro = 16, W = 16;
constexpr int IH = 4, IDh = 64, ITopk = 4, E = 8, K = 3, I = 16, HC = 4;
const char* const kLayerTypes[L] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                                    "compressed_sparse_attention", "heavily_compressed_attention",
                                    "compressed_sparse_attention"};
const bool kHash[L] = {true, true, false, false, false, false};

using Writer = aff::test::RandomSafetensors;

void compressor(Writer& w, const std::string& p, int ratio, int dim, bool overlap) {
    const int width = overlap ? 2 * dim : dim;
    w.matrix(p + "wkv.weight", width, D);
    w.matrix(p + "wgate.weight", width, D);
    w.bf16(p + "ape", {std::uint64_t(ratio), std::uint64_t(width)}, 0.0f, 0.5f);
    w.bf16(p + "norm.weight", {std::uint64_t(dim)}, 1.0f, 0.1f);
}

void hyper(Writer& w, const std::string& p, const std::string& site, int rows) {
    w.bf16(p + "hc_" + site + "_fn", {std::uint64_t(rows), std::uint64_t(HC * D)}, 0.0f, 0.05f);
    w.bf16(p + "hc_" + site + "_base", {std::uint64_t(rows)}, 0.0f, 0.5f);
    w.bf16(p + "hc_" + site + "_scale", {std::uint64_t(site == "head" ? 1 : 3)}, 0.5f, 0.25f);
}

json config() {
    json c = {{"architectures", {"DeepseekV4ForCausalLM"}}, {"model_type", "deepseek_v4"},
              {"vocab_size", V}, {"hidden_size", D}, {"num_hidden_layers", L}, {"num_attention_heads", H},
              {"num_key_value_heads", 1}, {"head_dim", Dh}, {"qk_rope_head_dim", Dr},
              {"partial_rotary_factor", double(Dr) / Dh}, {"q_lora_rank", Rq}, {"o_groups", G},
              {"o_lora_rank", Ro}, {"sliding_window", W},
              {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 16}}},
              {"index_n_heads", IH}, {"index_head_dim", IDh}, {"index_topk", ITopk}, {"n_routed_experts", E},
              {"num_experts_per_tok", K}, {"n_shared_experts", 1}, {"moe_intermediate_size", I},
              {"routed_scaling_factor", 1.5}, {"swiglu_limit", 10.0}, {"norm_topk_prob", true},
              {"scoring_func", "sqrtsoftplus"}, {"hidden_act", "silu"}, {"hc_mult", HC},
              {"hc_sinkhorn_iters", 20}, {"hc_eps", 1e-6}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
              {"compress_rope_theta", 160000.0}, {"max_position_embeddings", 4096},
              {"num_nextn_predict_layers", 0}, {"tie_word_embeddings", false}, {"bos_token_id", 0},
              {"eos_token_id", 1}, {"torch_dtype", "bfloat16"}};
    c["layer_types"] = json::array();
    c["mlp_layer_types"] = json::array();
    for (int i = 0; i < L; ++i) {
        c["layer_types"].push_back(kLayerTypes[i]);
        c["mlp_layer_types"].push_back(kHash[i] ? "hash_moe" : "moe");
    }
    c["rope_parameters"] = {
        {"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", double(Dr) / Dh}}},
        {"compress",
         {{"rope_type", "yarn"}, {"rope_theta", 160000.0}, {"factor", 16.0},
          {"original_max_position_embeddings", 65536}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
          {"attention_factor", 1.0}, {"partial_rotary_factor", double(Dr) / Dh}}}};
    return c;
}

void write_model(const std::string& dir, std::uint64_t seed) {
    Writer w(seed);
    w.bf16("embed.weight", {V, D}, 0.0f, 1.0f);
    w.matrix("head.weight", V, D);
    w.bf16("norm.weight", {D}, 1.0f, 0.1f);
    hyper(w, "", "head", HC);
    const int mix = (2 + HC) * HC;
    for (int l = 0; l < L; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        const std::string type = kLayerTypes[l];
        w.bf16(p + "attn_norm.weight", {D}, 1.0f, 0.1f);
        w.bf16(p + "ffn_norm.weight", {D}, 1.0f, 0.1f);
        hyper(w, p, "attn", mix);
        hyper(w, p, "ffn", mix);
        const std::string a = p + "attn.";
        w.bf16(a + "attn_sink", {H}, 0.0f, 1.0f);
        w.matrix(a + "wq_a.weight", Rq, D);
        w.bf16(a + "q_norm.weight", {Rq}, 1.0f, 0.1f);
        w.matrix(a + "wq_b.weight", H * Dh, Rq);
        w.matrix(a + "wkv.weight", Dh, D);
        w.bf16(a + "kv_norm.weight", {Dh}, 1.0f, 0.1f);
        w.matrix(a + "wo_a.weight", G * Ro, H * Dh / G);
        w.matrix(a + "wo_b.weight", D, G * Ro);
        if (type != "sliding_attention") {
            const bool csa = type == "compressed_sparse_attention";
            compressor(w, a + "compressor.", csa ? 4 : 16, Dh, csa);
            if (csa) {
                w.matrix(a + "indexer.wq_b.weight", IH * IDh, Rq);
                w.matrix(a + "indexer.weights_proj.weight", IH, D);
                compressor(w, a + "indexer.compressor.", 4, IDh, true);
            }
        }
        const std::string f = p + "ffn.";
        w.matrix(f + "gate.weight", E, D);
        if (kHash[l]) w.tid2eid(f + "gate.tid2eid", V, K, E);
        else w.bf16(f + "gate.bias", {E}, 0.0f, 0.1f);
        for (const std::string& e : {std::string("shared_experts."), std::string()}) {
            const int count = e.empty() ? E : 1;
            for (int x = 0; x < count; ++x) {
                const std::string q = f + (e.empty() ? "experts." + std::to_string(x) + "." : e);
                w.matrix(q + "w1.weight", I, D);
                w.matrix(q + "w2.weight", D, I);
                w.matrix(q + "w3.weight", I, D);
            }
        }
    }
    w.save_checkpoint(dir, config());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: aff_make_random_model OUT_DIR [SEED]\n");
        return 2;
    }
    try {
        write_model(argv[1], argc == 3 ? std::stoull(argv[2]) : 1);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aff_make_random_model: %s\n", e.what());
        return 1;
    }
    return 0;
}
