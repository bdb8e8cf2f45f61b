// Loading ModelWeights from a TensorReader: a checkpoint or a container (see weights.hpp). Every read names the
// canonical tensor and the shape the config implies, so a mismatch is one clear error.
#include "libaff/model/weights.hpp"

#include "libaff/checkpoint/tensor_reader.hpp"
#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff {

DenseExpertSource::DenseExpertSource(int layers, int experts)
    : experts_(experts), m_(static_cast<std::size_t>(layers) * experts * 3) {}

Matrix& DenseExpertSource::at(int layer, int expert, ExpertMatrix which) {
    return m_[(static_cast<std::size_t>(layer) * experts_ + expert) * 3 + static_cast<int>(which)];
}

const Matrix& DenseExpertSource::at(int layer, int expert, ExpertMatrix which) const {
    return m_[(static_cast<std::size_t>(layer) * experts_ + expert) * 3 + static_cast<int>(which)];
}

void DenseExpertSource::matvec(int layer, int expert, ExpertMatrix which, const float* x, float* y) const {
    const Matrix& m = m_[(static_cast<std::size_t>(layer) * experts_ + expert) * 3 + static_cast<int>(which)];
    for (int r = 0; r < m.rows; ++r) {
        const float* w = m.row(r);
        float acc = 0;
        for (int c = 0; c < m.cols; ++c) acc += w[c] * x[c];
        y[r] = acc;
    }
}

namespace {
using u64 = std::uint64_t;

struct Loader {
    const TensorReader& ck;
    const ModelConfig& c;

    Matrix matrix(const std::string& name, int rows, int cols) const {
        Matrix m;
        m.rows = rows;
        m.cols = cols;
        m.w = ck.read_f32(name, {static_cast<u64>(rows), static_cast<u64>(cols)});
        return m;
    }
    std::vector<float> vec(const std::string& name, int n) const { return ck.read_f32(name, {static_cast<u64>(n)}); }

    HyperConnectionWeights hc(const std::string& p, const std::string& site) const {
        const int n = c.hc_mult, D = c.hidden_size;
        return {matrix(p + "hc_" + site + "_fn", c.mix_width(), n * D), vec(p + "hc_" + site + "_base", c.mix_width()),
                vec(p + "hc_" + site + "_scale", 3)};
    }
    HyperHeadWeights hc_head(const std::string& p) const {
        const int n = c.hc_mult, D = c.hidden_size;
        return {matrix(p + "hc_head_fn", n, n * D), vec(p + "hc_head_base", n), vec(p + "hc_head_scale", 1)};
    }
    CompressorWeights compressor(const std::string& p, int ratio, int dim, bool overlap) const {
        CompressorWeights w;
        w.ratio = ratio;
        w.dim = dim;
        w.overlap = overlap;
        const int width = overlap ? 2 * dim : dim;
        w.wkv = matrix(p + "wkv.weight", width, c.hidden_size);
        w.wgate = matrix(p + "wgate.weight", width, c.hidden_size);
        w.ape = matrix(p + "ape", ratio, width);
        w.norm = vec(p + "norm.weight", dim);
        return w;
    }

    LayerWeights layer(const std::string& p, AttentionKind kind, int ratio, bool hash, int expert_layer,
                       DenseExpertSource* experts) const {
        const int D = c.hidden_size, H = c.num_heads, Dh = c.head_dim, G = c.o_groups;
        LayerWeights L;
        L.attn_norm = vec(p + "attn_norm.weight", D);
        L.ffn_norm = vec(p + "ffn_norm.weight", D);
        L.hc_attn = hc(p, "attn");
        L.hc_ffn = hc(p, "ffn");
        AttentionWeights& a = L.attn;
        const std::string ap = p + "attn.";
        a.sink = vec(ap + "attn_sink", H);
        a.wq_a = matrix(ap + "wq_a.weight", c.q_lora_rank, D);
        a.q_norm = vec(ap + "q_norm.weight", c.q_lora_rank);
        a.wq_b = matrix(ap + "wq_b.weight", H * Dh, c.q_lora_rank);
        a.wkv = matrix(ap + "wkv.weight", Dh, D);
        a.kv_norm = vec(ap + "kv_norm.weight", Dh);
        a.wo_a = matrix(ap + "wo_a.weight", G * c.o_lora_rank, H * Dh / G);
        a.wo_b = matrix(ap + "wo_b.weight", D, G * c.o_lora_rank);
        if (kind != AttentionKind::sliding) {
            a.has_compressor = true;
            a.compressor = compressor(ap + "compressor.", ratio, Dh, kind == AttentionKind::csa);
        }
        if (kind == AttentionKind::csa) {
            a.has_indexer = true;
            a.index_wq_b = matrix(ap + "indexer.wq_b.weight", c.index_heads * c.index_head_dim, c.q_lora_rank);
            a.index_weights = matrix(ap + "indexer.weights_proj.weight", c.index_heads, D);
            a.index_compressor = compressor(ap + "indexer.compressor.", ratio, c.index_head_dim, true);
        }
        FfnWeights& f = L.ffn;
        const std::string fp = p + "ffn.";
        const int E = c.n_routed_experts, k = c.experts_per_token, I = c.moe_intermediate_size;
        f.gate = matrix(fp + "gate.weight", E, D);
        if (hash) {
            const std::string name = fp + "gate.tid2eid";
            const auto ids = ck.read_i64(name, {static_cast<u64>(c.vocab_size), static_cast<u64>(k)});
            f.tid2eid.resize(ids.size());
            for (std::size_t r = 0; r < static_cast<std::size_t>(c.vocab_size); ++r) {
                for (int j = 0; j < k; ++j) {
                    const std::int64_t e = ids[r * k + j];
                    if (e < 0 || e >= E)
                        throw_format("tensor " + name + ": row " + std::to_string(r) + " has expert id " +
                                         std::to_string(e) + ", outside [0, " + std::to_string(E) + ")",
                                     ck.file_of(name));
                    for (int i = 0; i < j; ++i)
                        if (ids[r * k + i] == e)
                            throw_format("tensor " + name + ": row " + std::to_string(r) + " repeats expert id " +
                                             std::to_string(e), ck.file_of(name));
                    f.tid2eid[r * k + j] = static_cast<std::int32_t>(e);
                }
            }
        } else {
            f.bias = vec(fp + "gate.bias", E);
        }
        if (c.n_shared_experts > 0) {
            f.has_shared = true;
            f.shared_w1 = matrix(fp + "shared_experts.w1.weight", I, D);
            f.shared_w2 = matrix(fp + "shared_experts.w2.weight", D, I);
            f.shared_w3 = matrix(fp + "shared_experts.w3.weight", I, D);
        }
        for (int e = 0; experts && e < E; ++e) {
            const std::string ep = fp + "experts." + std::to_string(e) + ".";
            experts->at(expert_layer, e, ExpertMatrix::w1) = matrix(ep + "w1.weight", I, D);
            experts->at(expert_layer, e, ExpertMatrix::w2) = matrix(ep + "w2.weight", D, I);
            experts->at(expert_layer, e, ExpertMatrix::w3) = matrix(ep + "w3.weight", I, D);
        }
        return L;
    }
};
// A TensorReader that checks instead of decoding: every float weight comes back empty.
class CheckingReader final : public TensorReader {
public:
    explicit CheckingReader(const TensorReader& inner) : inner_(inner) {}
    bool has(const std::string& name) const override { return inner_.has(name); }
    std::vector<float> read_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override {
        inner_.check_f32(name, shape);
        return {};
    }
    void check_f32(const std::string& name, const std::vector<std::uint64_t>& shape) const override {
        inner_.check_f32(name, shape);
    }
    std::vector<std::int64_t> read_i64(const std::string& name, const std::vector<std::uint64_t>& shape) const override {
        return inner_.read_i64(name, shape);
    }
    std::string file_of(const std::string& name) const override { return inner_.file_of(name); }
    std::optional<Fp8Stored> fp8_stored(const std::string&) const override { return std::nullopt; }

private:
    const TensorReader& inner_;
};

// Stands in for experts already checked; never multiplied with.
class CheckedExperts final : public ExpertSource {
public:
    void matvec(int, int, ExpertMatrix, const float*, float*) const override {
        throw_internal("check_model_weights: experts are not for use");
    }
};

}  // namespace

void check_model_weights(const TensorReader& tensors, const ModelConfig& config, bool experts_checked) {
    const CheckingReader checking(tensors);
    load_model_weights(checking, config, experts_checked ? std::make_shared<CheckedExperts>() : nullptr);
}

int mtp_layers_present(const TensorReader& tensors, const ModelConfig& c) {
    return c.num_mtp_layers > 0 && tensors.has("mtp.0.e_proj.weight") ? c.num_mtp_layers : 0;
}

int dspark_stages_present(const TensorReader& tensors) {
    if (!tensors.has("mtp.0.main_proj.weight")) return 0;
    int s = 0;
    while (s < 64 && tensors.has("mtp." + std::to_string(s) + ".attn_norm.weight")) ++s;
    return s;
}

namespace {
DsparkWeights load_dspark(const Loader& ld, const TensorReader& ck, const ModelConfig& c, int stages,
                          DenseExpertSource* dense) {
    const int D = c.hidden_size, V = c.vocab_size, r = c.dspark.markov_rank;
    const std::string first = "mtp.0.", last = "mtp." + std::to_string(stages - 1) + ".";
    if (c.dspark.noise_token_id >= V)
        throw_format("DSpark stages present but the config has no dspark_noise_token_id, and the default 128799 is "
                     "outside the vocabulary of " + std::to_string(V),
                     ck.file_of(first + "main_proj.weight"));
    DsparkWeights w;
    w.main_proj = ld.matrix(first + "main_proj.weight", D, int(c.dspark.tap_layers.size()) * D);
    w.main_norm = ld.vec(first + "main_norm.weight", D);
    for (int s = 0; s < stages; ++s)
        w.stages.push_back(ld.layer("mtp." + std::to_string(s) + ".", AttentionKind::sliding, 0, false,
                                    c.num_layers + s, dense));
    w.norm = ld.vec(last + "norm.weight", D);
    w.hc_head = ld.hc_head(last);
    w.markov_w1 = ld.matrix(last + "markov_head.markov_w1.weight", V, r);
    w.markov_w2 = ld.matrix(last + "markov_head.markov_w2.weight", V, r);
    w.confidence = ld.matrix(last + "confidence_head.proj.weight", 1, D + r);
    return w;
}
}  // namespace

ModelWeights load_model_weights(const TensorReader& ck, const ModelConfig& c,
                                std::shared_ptr<const ExpertSource> experts) {
    Loader ld{ck, c};
    ModelWeights w;
    const int D = c.hidden_size, V = c.vocab_size;
    w.embed = ld.matrix("embed.weight", V, D);
    w.head = c.tie_word_embeddings && !ck.has("head.weight") ? w.embed : ld.matrix("head.weight", V, D);
    w.norm = ld.vec("norm.weight", D);
    w.hc_head = ld.hc_head("");
    const int mtp_layers = mtp_layers_present(ck, c), dspark_stages = dspark_stages_present(ck);
    std::shared_ptr<DenseExpertSource> dense;
    if (!experts)
        dense = std::make_shared<DenseExpertSource>(c.num_layers + std::max(mtp_layers, dspark_stages),
                                                    c.n_routed_experts);
    for (int i = 0; i < c.num_layers; ++i)
        w.layers.push_back(ld.layer("layers." + std::to_string(i) + ".", c.attention[i], c.compress_ratio[i],
                                    c.hash_routed[i], i, dense.get()));
    for (int i = 0; i < mtp_layers; ++i) {
        const std::string p = "mtp." + std::to_string(i) + ".";
        MtpWeights m;
        m.e_proj = ld.matrix(p + "e_proj.weight", D, D);
        m.h_proj = ld.matrix(p + "h_proj.weight", D, D);
        m.enorm = ld.vec(p + "enorm.weight", D);
        m.hnorm = ld.vec(p + "hnorm.weight", D);
        m.norm = ld.vec(p + "norm.weight", D);
        m.hc_head = ld.hc_head(p);
        m.layer = ld.layer(p, AttentionKind::sliding, 0, false, c.num_layers + i, dense.get());
        w.mtp.push_back(std::move(m));
    }
    if (dspark_stages > 0) w.dspark = load_dspark(ld, ck, c, dspark_stages, dense.get());
    if (dense) w.experts = std::move(dense);
    else w.experts = std::move(experts);
    return w;
}

}  // namespace aff
