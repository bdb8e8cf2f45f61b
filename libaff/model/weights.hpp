// The weights of a DeepSeek-V4 model as the CPU reference uses them: dense tensors
// dequantised to float32 (names and shapes: model doc §2.2-2.4), routed experts behind
// the ExpertSource interface so that a backend holding quantised experts (a container,
// a GPU slab) can decode rows on the fly instead of materialising 277 B floats.
#pragma once

#include "libaff/checkpoint/config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aff {

class TensorReader;

// Row-major [rows, cols].
struct Matrix {
    int rows = 0, cols = 0;
    std::vector<float> w;
    const float* row(int r) const { return w.data() + static_cast<std::size_t>(r) * cols; }
};

enum class ExpertMatrix { w1, w2, w3 };  // gate [I, D], down [D, I], up [I, D]

// Routed-expert weights of every layer. `layer` counts main layers first, then MTP
// layers (num_layers + i). Implementations must be safe to call from several threads.
class ExpertSource {
public:
    virtual ~ExpertSource() = default;
    // y = W x for one matrix of one expert; x has W's column count, y its row count.
    virtual void matvec(int layer, int expert, ExpertMatrix which, const float* x, float* y) const = 0;
};

// Every expert decoded to float32 at load: right for tiny models and tests.
class DenseExpertSource final : public ExpertSource {
public:
    DenseExpertSource(int layers, int experts);
    Matrix& at(int layer, int expert, ExpertMatrix which);
    const Matrix& at(int layer, int expert, ExpertMatrix which) const;
    void matvec(int layer, int expert, ExpertMatrix which, const float* x, float* y) const override;

private:
    int experts_;
    std::vector<Matrix> m_;  // [layer][expert][3]
};

struct HyperConnectionWeights {  // one mHC site: fn [(2+n)n, nD], base [(2+n)n], scale [3]
    Matrix fn;
    std::vector<float> base, scale;
};

struct HyperHeadWeights {  // fn [n, nD], base [n], scale [1]
    Matrix fn;
    std::vector<float> base, scale;
};

struct CompressorWeights {
    int ratio = 0;
    int dim = 0;           // entry width: head_dim (main) or index_head_dim (indexer)
    bool overlap = false;  // CSA: projections are 2·dim wide (Ca | Cb)
    Matrix wkv, wgate;     // [(overlap ? 2 : 1)·dim, D]
    Matrix ape;            // [ratio, (overlap ? 2 : 1)·dim]
    std::vector<float> norm;
};

struct AttentionWeights {
    std::vector<float> sink;  // [H]
    Matrix wq_a;              // [Rq, D]
    std::vector<float> q_norm;
    Matrix wq_b;              // [H·Dh, Rq]
    Matrix wkv;               // [Dh, D]
    std::vector<float> kv_norm;
    Matrix wo_a;              // [G·Ro, H·Dh/G]
    Matrix wo_b;              // [D, G·Ro]
    bool has_compressor = false, has_indexer = false;
    CompressorWeights compressor;
    Matrix index_wq_b;        // [Hi·Di, Rq]
    Matrix index_weights;     // [Hi, D]
    CompressorWeights index_compressor;
};

struct FfnWeights {
    Matrix gate;                    // router [E, D]
    std::vector<float> bias;        // selection-only correction bias [E] (learned routing)
    std::vector<std::int32_t> tid2eid;  // [V, k] (hash routing)
    bool has_shared = false;
    Matrix shared_w1, shared_w2, shared_w3;
};

struct LayerWeights {
    std::vector<float> attn_norm, ffn_norm;
    HyperConnectionWeights hc_attn, hc_ffn;
    AttentionWeights attn;
    FfnWeights ffn;
};

struct MtpWeights {
    Matrix e_proj, h_proj;  // [D, D]
    std::vector<float> enorm, hnorm, norm;
    HyperHeadWeights hc_head;
    LayerWeights layer;
};

// The DSpark drafter (model doc §2.5, §5.2): S stages mtp.0 .. mtp.<S-1>, each a complete
// sliding-only layer with learned routing; the tap projection on the first stage, the head
// side (hyper head, norm, Markov and confidence heads) on the last.
struct DsparkWeights {
    Matrix main_proj;                // mtp.0.main_proj [D, taps·D]
    std::vector<float> main_norm;    // mtp.0.main_norm [D]
    std::vector<LayerWeights> stages;
    std::vector<float> norm;         // mtp.<S-1>.norm [D]
    HyperHeadWeights hc_head;        // mtp.<S-1>.hc_head_*
    Matrix markov_w1, markov_w2;     // mtp.<S-1>.markov_head.markov_w{1,2} [V, r]
    Matrix confidence;               // mtp.<S-1>.confidence_head.proj [1, D + r]
};

struct ModelWeights {
    Matrix embed, head;  // [V, D]
    std::vector<float> norm;
    HyperHeadWeights hc_head;
    std::vector<LayerWeights> layers;
    std::vector<MtpWeights> mtp;  // empty when the checkpoint has none (transformers drops them)
    DsparkWeights dspark;         // stages empty when the checkpoint has no DSpark drafter
    std::shared_ptr<const ExpertSource> experts;
};

// MTP layers present in `tensors` (config.num_mtp_layers when "mtp.0.e_proj.weight" is
// there, else 0: transformers checkpoints drop them).
int mtp_layers_present(const TensorReader& tensors, const ModelConfig& config);

// DSpark stages present in `tensors`: 0 unless "mtp.0.main_proj.weight" is there, else the
// number of consecutive stages s = 0, 1, ... with an "mtp.<s>.attn_norm.weight" (the doc's
// rule: count the mtp.<s>. prefixes; V4-Flash-0731 has 3). ExpertSource layer num_layers + s
// is stage s, as for MTP layers.
int dspark_stages_present(const TensorReader& tensors);

// Reads every tensor the config calls for from a checkpoint or a container, checking
// shapes; tid2eid rows must hold distinct expert ids in range. MTP layers are read when
// present, and so are DSpark stages (their tap layers, noise id and Markov rank checked against
// the tensors and the vocabulary). Routed experts come from `experts` when given (it must
// cover the main layers and the larger of mtp_layers_present() and dspark_stages_present()); otherwise every one is read and decoded to
// float32 into a DenseExpertSource.
ModelWeights load_model_weights(const TensorReader& tensors, const ModelConfig& config,
                                std::shared_ptr<const ExpertSource> experts = nullptr);

// Every check load_model_weights makes, without decoding a weight (check_f32 instead of
// read_f32; tid2eid is read, as its ids are checked): is a checkpoint or container
// complete and consistent with its config? Routed experts are checked too unless
// `experts_checked` says the caller has (a ContainerExpertSource checks its own).
// Throws the aff::Error loading would throw.
void check_model_weights(const TensorReader& tensors, const ModelConfig& config, bool experts_checked = false);

}  // namespace aff
