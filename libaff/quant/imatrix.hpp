// Importance matrices written by llama.cpp's llama-imatrix: the GGUF form
// (general.type = "imatrix"; per tensor "<name>.in_sum2" F32 [cols, matrices],
// "<name>.counts" F32 [1, matrices], optional "<name>.in_sum") and the legacy .dat form
// (int32 entry count; per entry int32 name length, name, int32 ncall, int32 nval, nval
// floats holding E[x²]·ncall, expert-major). Also maps llama.cpp's DeepSeek-V4 tensor
// names (architecture "deepseek4": blk.N.ffn_{gate,up,down}_exps.weight for the routed
// experts, blk.N.attn_q_a.weight and the like for the rest) to ours. Every defect is an
// aff::Error naming the file and the tensor or field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace aff::quant {

struct ImatrixEntry {
    std::string name;                 // llama.cpp's tensor name, e.g. "blk.3.ffn_up_exps.weight"
    std::uint64_t cols = 0;           // input columns (GGUF); for .dat the whole value count
    std::uint64_t matrices = 1;       // experts (GGUF); 1 for dense tensors and for .dat entries
    std::vector<float> sum2;          // GGUF: Σx² per column and matrix; .dat: E[x²]·ncall
    std::vector<float> counts;        // GGUF: vectors seen per matrix; empty for .dat
    std::int32_t ncall = 0;           // .dat only
};

struct Imatrix {
    std::string path;
    bool legacy = false;  // .dat
    std::vector<std::string> datasets;
    std::uint32_t chunk_count = 0, chunk_size = 0;
    std::vector<ImatrixEntry> entries;  // in file order

    const ImatrixEntry* find(const std::string& name) const;

    // E[x²] per input column of matrix `expert` of `entry`, for a weight with `cols`
    // inputs and `experts` matrices as the checkpoint has them. A column with no data
    // (count 0) gets 1. Throws a format error naming the tensor when the shapes disagree.
    std::vector<float> importance(const ImatrixEntry& entry, std::size_t expert, std::size_t cols,
                                  std::size_t experts) const;
};

// Detects the form by its first bytes ("GGUF" or not).
Imatrix read_imatrix(const std::string& path);
Imatrix parse_imatrix(std::span<const std::uint8_t> bytes, const std::string& path);

// Which of a layer's routed-expert matrices an imatrix tensor describes.
struct ExpertTensorRef {
    int layer = 0;
    bool w1 = false, w2 = false, w3 = false;  // gate (w1), down (w2), up (w3); fused gate_up: w1 and w3
};

// blk.N.ffn_gate_exps.weight → w1, ffn_up_exps → w3, ffn_down_exps → w2 (the three
// tensors llama.cpp's DeepSeek-V4 loader creates, each [cols, rows, experts]);
// ffn_gate_up_exps → w1 + w3 (the fused form llama.cpp uses for other MoE models; both
// halves see the same input). nullopt for any other name.
std::optional<ExpertTensorRef> map_expert_tensor(const std::string& llama_name);

// A tensor name of llama.cpp's "deepseek4" architecture, as llama-imatrix records it
// (the weight of a matrix product), and what it is in our checkpoint.
struct LlamaTensorMatch {
    int block = -1;  // N of blk.N; -1 for output.weight
    // llama.cpp numbers the MTP block after the trunk: blk.{trunk_layers + s} is our
    // mtp.{s}. Only known when trunk_layers > 0.
    bool mtp = false;
    // Our tensors, e.g. {"layers.3.attn.wq_a.weight"}; for routed experts the name has
    // "{e}" where the expert id goes ("layers.3.ffn.experts.{e}.w1.weight"); a fused
    // llama.cpp tensor names each of ours (gate_up: w1 and w3; MTP eh_proj: e_proj and h_proj).
    std::vector<std::string> ours;
    std::optional<ExpertTensorRef> experts;  // set for routed-expert tensors
};

// nullopt: the name is no matrix of a DeepSeek-V4 GGUF (report it; a file made for
// another model, or a llama.cpp naming change). trunk_layers: the checkpoint's layer
// count (43 for V4-Flash), or 0 when unknown (every block counts as a trunk layer).
std::optional<LlamaTensorMatch> match_llama_tensor(const std::string& llama_name, int trunk_layers);

// Our name of matrix `which` ("w1", "w2", "w3") of expert e in layer l:
// "layers.l.ffn.experts.e.which.weight".
std::string expert_weight_name(int layer, int expert, const char* which);

}  // namespace aff::quant
