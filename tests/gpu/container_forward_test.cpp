// Device test of the GPU forward on quantised .aff containers, GPU against the CPU forward on
// the same container (the CPU decodes the codebook experts on the fly with quant::matvec, the
// GPU multiplies the stored bytes with moe_gemv, after the hadamard kernel for TQ2875R):
//   - a random checkpoint written here whose expert shapes moe_gemv takes (hidden and expert
//     width 1024, 4 experts, top 2, 3 layers: sliding, CSA, HCA) with FP8 dense linears (E4M3
//     codes, E8M0 block scales) and BF16 experts, quantised by aff-quantize's library call to
//     TQ2875 (--rotation off) and TQ2875R (--rotation on): describe() must say the experts are
//     codebook-stored and the FP8 linears stayed FP8, and a prompt as one prefill (every
//     position's logits) then greedy decode steps must give the CPU's argmax at every position
//     with logits within a tight bound (tests/gpu/forward_compare.hpp);
//   - every tiny fixture quantised the same way (experts too small for moe_gemv: decoded at
//     load through the source's matvec; tiny-a-fp8's dense FP8 stays FP8).
#include "device_test.hpp"
#include "forward_compare.hpp"
#include "../common/random_safetensors.hpp"

#include "aff/container/container.hpp"
#include "aff/core/atomic_file.hpp"
#include "aff/core/hash.hpp"
#include "aff/core/progress.hpp"
#include "aff/core/thread_pool.hpp"
#include "aff/gpu/forward.hpp"
#include "aff/model/container_tensors.hpp"
#include "aff/model/forward.hpp"
#include "aff/quant/quantize_model.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace aff::gpu::test;
namespace fs = std::filesystem;

namespace {

constexpr int kDecodeSteps = 10;
constexpr double kMaxNmse = 1e-9;   // fp32 sums in other orders; the same quantised weights on both sides
constexpr double kMaxAbs = 1e-3;    // logits are O(1); measured 1.6e-6 .. 4.6e-6 (RESULTS.md)

// The wide geometry: moe_gemv takes D = I = 1024.
constexpr int V = 512, D = 1024, L = 3, H = 4, Dh = 128, Dr = 64, Rq = 128, G = 2, Ro = 64, W = 16;
constexpr int IH = 4, IDh = 128, E = 4, K = 2, I = 1024, HC = 4;
const char* const kLayerTypes[L] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};
const bool kHash[L] = {true, false, false};

nlohmann::json wide_config() {
    nlohmann::json c = {
        {"architectures", {"DeepseekV4ForCausalLM"}}, {"model_type", "deepseek_v4"}, {"vocab_size", V},
        {"hidden_size", D}, {"num_hidden_layers", L}, {"num_attention_heads", H}, {"num_key_value_heads", 1},
        {"head_dim", Dh}, {"qk_rope_head_dim", Dr}, {"partial_rotary_factor", double(Dr) / Dh}, {"q_lora_rank", Rq},
        {"o_groups", G}, {"o_lora_rank", Ro}, {"sliding_window", W},
        {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 16}}},
        {"index_n_heads", IH}, {"index_head_dim", IDh}, {"index_topk", 4}, {"n_routed_experts", E},
        {"num_experts_per_tok", K}, {"n_shared_experts", 1}, {"moe_intermediate_size", I},
        {"routed_scaling_factor", 1.5}, {"swiglu_limit", 10.0}, {"norm_topk_prob", true},
        {"scoring_func", "sqrtsoftplus"}, {"hidden_act", "silu"}, {"hc_mult", HC}, {"hc_sinkhorn_iters", 20},
        {"hc_eps", 1e-6}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"compress_rope_theta", 160000.0},
        {"max_position_embeddings", 4096}, {"num_nextn_predict_layers", 0}, {"tie_word_embeddings", false},
        {"bos_token_id", 0}, {"eos_token_id", 1}, {"torch_dtype", "bfloat16"}};
    c["layer_types"] = nlohmann::json::array();
    c["mlp_layer_types"] = nlohmann::json::array();
    for (int i = 0; i < L; ++i) {
        c["layer_types"].push_back(kLayerTypes[i]);
        c["mlp_layer_types"].push_back(kHash[i] ? "hash_moe" : "moe");
    }
    c["rope_parameters"] = {
        {"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", double(Dr) / Dh}}},
        {"compress",
         {{"rope_type", "yarn"}, {"rope_theta", 160000.0}, {"factor", 16.0}, {"original_max_position_embeddings", 65536},
          {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"attention_factor", 1.0},
          {"partial_rotary_factor", double(Dr) / Dh}}}};
    return c;
}

// The random checkpoint (official tensor names); returns how many linears are FP8.
int write_wide_checkpoint(const std::string& dir) {
    aff::test::RandomSafetensors w(0x5eed);
    int fp8 = 0;
    auto lin = [&](const std::string& name, int rows, int cols) {
        w.matrix_fp8(name, rows, cols);
        ++fp8;
    };
    auto hyper = [&](const std::string& p, const std::string& site, int rows) {
        w.bf16(p + "hc_" + site + "_fn", {std::uint64_t(rows), std::uint64_t(HC * D)}, 0.0f, 0.05f);
        w.bf16(p + "hc_" + site + "_base", {std::uint64_t(rows)}, 0.0f, 0.5f);
        w.bf16(p + "hc_" + site + "_scale", {std::uint64_t(site == "head" ? 1 : 3)}, 0.5f, 0.25f);
    };
    auto compressor = [&](const std::string& p, int ratio, int dim, bool overlap) {
        const int width = overlap ? 2 * dim : dim;
        lin(p + "wkv.weight", width, D);
        lin(p + "wgate.weight", width, D);
        w.bf16(p + "ape", {std::uint64_t(ratio), std::uint64_t(width)}, 0.0f, 0.5f);
        w.bf16(p + "norm.weight", {std::uint64_t(dim)}, 1.0f, 0.1f);
    };
    w.bf16("embed.weight", {V, D}, 0.0f, 1.0f);
    w.matrix("head.weight", V, D);
    w.bf16("norm.weight", {D}, 1.0f, 0.1f);
    hyper("", "head", HC);
    for (int l = 0; l < L; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".", type = kLayerTypes[l];
        w.bf16(p + "attn_norm.weight", {D}, 1.0f, 0.1f);
        w.bf16(p + "ffn_norm.weight", {D}, 1.0f, 0.1f);
        hyper(p, "attn", (2 + HC) * HC);
        hyper(p, "ffn", (2 + HC) * HC);
        const std::string a = p + "attn.";
        w.bf16(a + "attn_sink", {H}, 0.0f, 1.0f);
        lin(a + "wq_a.weight", Rq, D);
        w.bf16(a + "q_norm.weight", {Rq}, 1.0f, 0.1f);
        lin(a + "wq_b.weight", H * Dh, Rq);
        lin(a + "wkv.weight", Dh, D);
        w.bf16(a + "kv_norm.weight", {Dh}, 1.0f, 0.1f);
        lin(a + "wo_a.weight", G * Ro, H * Dh / G);
        lin(a + "wo_b.weight", D, G * Ro);
        if (type != "sliding_attention") {
            const bool csa = type == "compressed_sparse_attention";
            compressor(a + "compressor.", csa ? 4 : 16, Dh, csa);
            if (csa) {
                lin(a + "indexer.wq_b.weight", IH * IDh, Rq);
                lin(a + "indexer.weights_proj.weight", IH, D);
                compressor(a + "indexer.compressor.", 4, IDh, true);
            }
        }
        const std::string f = p + "ffn.";
        lin(f + "gate.weight", E, D);
        if (kHash[l]) w.tid2eid(f + "gate.tid2eid", V, K, E);
        else w.bf16(f + "gate.bias", {E}, 0.0f, 0.1f);
        lin(f + "shared_experts.w1.weight", I, D);
        lin(f + "shared_experts.w2.weight", D, I);
        lin(f + "shared_experts.w3.weight", I, D);
        for (int e = 0; e < E; ++e) {
            const std::string q = f + "experts." + std::to_string(e) + ".";
            w.matrix(q + "w1.weight", I, D);
            w.matrix(q + "w2.weight", D, I);
            w.matrix(q + "w3.weight", I, D);
        }
    }
    w.save_checkpoint(dir, wide_config());
    return fp8;
}

void quantize(const std::string& src, const std::string& out, aff::quant::Rotation rotation, aff::ThreadPool& pool) {
    aff::quant::QuantizeOptions o;
    o.src_dir = src;
    o.out_path = out;
    o.matrix.rotation = rotation;
    o.tool = "aff_gpu_tests";
    o.created = "2026-01-01T00:00:00Z";
    aff::quant::quantize_checkpoint(o, pool, aff::null_progress());
}

// GPU vs CPU on one container: a prompt as one prefill, then greedy decode steps
// (forward_compare.hpp). Returns describe().
std::string compare_container(const std::string& name, const std::string& path, int prompt_len,
                              std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    aff::gpu::GpuOptions opt;
    opt.gemm_min_tokens = 0;  // GEMVs only: the exact path, held to the tight bounds (aff-gpucheck checks the GEMMs)
    aff::gpu::GpuModel gpu(*cpu, &reader, opt);
    const std::string described = gpu.describe();
    std::printf("container %s: %s\n", name.c_str(), described.c_str());
    ForwardCase c;
    c.family = "container";
    c.name = name;
    c.prompt_len = prompt_len;
    c.chunks = {prompt_len};
    c.decode_steps = kDecodeSteps;
    c.max_nmse = kMaxNmse;
    c.max_abs = kMaxAbs;
    compare_forward(*cpu, gpu, c, rows);
    return described;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("aff-gpu-container-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

AFF_DEVICE_TEST("container") {
    TempDir tmp;
    aff::ThreadPool pool(0);
    // The wide random checkpoint, as TQ2875 and as TQ2875R.
    try {
        const std::string ck = tmp / "wide";
        const int fp8 = write_wide_checkpoint(ck);
        // Linears fp8_gemv takes (k % 128 == 0, n % 8 == 0; wo_a sliced per group of 64 rows,
        // the router's 4 rows and the indexer's 4 weights rows are not): the rest stay FP8.
        const int fp8_on_gpu = fp8 - L - L /* wo_a, gate */ - 1 /* weights_proj */;
        for (const auto& [rotation, label, type] :
             {std::tuple{aff::quant::Rotation::off, "wide D=I=1024, TQ2875", "TQ2875 codebook-stored"},
              std::tuple{aff::quant::Rotation::on, "wide D=I=1024, TQ2875R", "TQ2875R codebook-stored"}}) {
            const std::string path = tmp / (std::string(rotation == aff::quant::Rotation::on ? "r" : "p") + ".aff");
            quantize(ck, path, rotation, pool);
            const std::string d = compare_container(label, path, 37, rows);
            add(rows, "container", std::string(label) + ": describe() says " + type, contains(d, type) ? 0.0 : 1.0, 0.0);
            const std::string want_fp8 = "linears: " + std::to_string(fp8_on_gpu) + " fp8";
            add(rows, "container", std::string(label) + ": describe() says " + want_fp8,
                contains(d, want_fp8) ? 0.0 : 1.0, 0.0);
            fs::remove(path);
        }
    } catch (const std::exception& e) {
        rows.push_back({"container", std::string("wide random container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    // Every tiny fixture through aff-quantize (automatic rotation: TQ2875R at these widths).
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        try {
            const std::string path = tmp / (std::string(name) + ".aff");
            quantize(test_data() + "/models/" + name, path, aff::quant::Rotation::automatic, pool);
            const std::string d = compare_container(name, path, 40, rows);
            if (std::string(name) == "tiny-a-fp8")
                add(rows, "container", "tiny-a-fp8: describe() has FP8 linears", contains(d, "linears: 0 fp8") ? 1.0 : 0.0,
                    0.0);
        } catch (const std::exception& e) {
            rows.push_back({"container", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}
