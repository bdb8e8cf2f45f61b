// write_geometry_container (geometry_container.hpp): lists the tensors the config calls for
// with their storage and value distribution, then streams them in aff-quantize's order
// (global tensors, then each layer's dense tensors by name, then its experts by index).
// Every tensor row has its own splitmix64 stream seeded from (seed, tensor name, row), so
// rows are generated in parallel and the bytes never depend on the thread count.
#include "libaff/quant/geometry_container.hpp"

#include "libaff/container/tensor_names.hpp"
#include "libaff/container/writer.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/quant/codebook_source.hpp"
#include "libaff/quant/config_truncate.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/quantize_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string_view>

namespace aff::quant {

nlohmann::json deepseek_v4_flash_config() {
    nlohmann::json ratios = nlohmann::json::array();
    for (int i = 0; i < 44; ++i) ratios.push_back(i < 2 || i == 43 ? 0 : (i % 2 == 0 ? 4 : 128));
    // Through text, so the numbers have the types a config.json read from disk has.
    return nlohmann::json::parse(nlohmann::json{
        {"architectures", {"DeepseekV4ForCausalLM"}},
        {"model_type", "deepseek_v4"},
        {"vocab_size", 129280},
        {"hidden_size", 4096},
        {"num_hidden_layers", 43},
        {"num_attention_heads", 64},
        {"num_key_value_heads", 1},
        {"head_dim", 512},
        {"qk_rope_head_dim", 64},
        {"q_lora_rank", 1024},
        {"o_groups", 8},
        {"o_lora_rank", 1024},
        {"sliding_window", 128},
        {"compress_ratios", ratios},
        {"compress_rope_theta", 160000.0},
        {"rope_theta", 10000.0},
        {"rope_scaling",
         {{"type", "yarn"}, {"factor", 16.0}, {"original_max_position_embeddings", 65536},
          {"beta_fast", 32.0}, {"beta_slow", 1.0}}},
        {"max_position_embeddings", 1048576},
        {"index_n_heads", 64},
        {"index_head_dim", 128},
        {"index_topk", 512},
        {"n_routed_experts", 256},
        {"n_shared_experts", 1},
        {"num_experts_per_tok", 6},
        {"moe_intermediate_size", 2048},
        {"num_hash_layers", 3},
        {"scoring_func", "sqrtsoftplus"},
        {"topk_method", "noaux_tc"},
        {"norm_topk_prob", true},
        {"routed_scaling_factor", 1.5},
        {"swiglu_limit", 10.0},
        {"hidden_act", "silu"},
        {"hc_mult", 4},
        {"hc_sinkhorn_iters", 20},
        {"hc_eps", 1e-6},
        {"rms_norm_eps", 1e-6},
        {"num_nextn_predict_layers", 1},
        {"expert_dtype", "fp4"},
        {"quantization_config",
         {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"scale_fmt", "ue8m0"},
          {"weight_block_size", {128, 128}}}},
        {"tie_word_embeddings", false},
        {"bos_token_id", 0},
        {"eos_token_id", 1},
        {"attention_bias", false},
        {"attention_dropout", 0.0},
        {"initializer_range", 0.02},
        {"torch_dtype", "bfloat16"},
    }.dump());
}

namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

struct Rng {
    u64 s;
    u64 next() { return splitmix64_mix(s += kSplitmix64Gamma); }
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
    // Irwin-Hall of four uniforms: mean 0, variance 1, bounded by ±2√3 (no outliers that
    // would dominate a relative-error check).
    float gauss() { return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f; }
};

// How a tensor's values are drawn.
enum class Kind {
    fp8_weight,  // F8_E4M3, about N(0,1)·16 rounded (the block scales carry the magnitude)
    fp8_scale,   // F8_E8M0: 2^round(log2(σ·√(8/5)/16)) or half that, per block (rms σ overall)
    bf16_gauss,  // BF16 N(0, σ²)
    bf16_uniform,  // BF16 centre ± spread
    f32_gauss,
    f32_uniform,
    tid2eid,     // I64 [V, k]: k distinct experts a row
    f32_values,  // F32, the spec's own values (a skewed router bias)
};

struct Spec {
    std::string name;
    Kind kind;
    std::vector<u64> shape;
    float a = 0, b = 0;  // σ; or centre, spread
    std::vector<float> values = {};  // f32_values
};

u64 rows_of(const Spec& s) { return s.shape.size() == 1 ? 1 : s.shape[0]; }
u64 cols_of(const Spec& s) { return s.shape.back(); }

StorageType type_of(Kind k) {
    switch (k) {
        case Kind::fp8_weight: return StorageType::F8_E4M3;
        case Kind::fp8_scale: return StorageType::F8_E8M0;
        case Kind::bf16_gauss:
        case Kind::bf16_uniform: return StorageType::BF16;
        case Kind::f32_gauss:
        case Kind::f32_uniform:
        case Kind::f32_values: return StorageType::F32;
        case Kind::tid2eid: break;
    }
    return StorageType::I64;
}

std::size_t element_bytes(Kind k) {
    switch (type_of(k)) {
        case StorageType::F8_E4M3:
        case StorageType::F8_E8M0: return 1;
        case StorageType::BF16: return 2;
        case StorageType::F32: return 4;
        default: return 8;
    }
}

// The 127 non-negative finite E4M3 values, code order = value order.
struct E4m3Table {
    std::array<float, 127> v;
    E4m3Table() {
        for (int c = 0; c < 127; ++c) {
            const int e = c >> 3, m = c & 7;
            v[c] = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
        }
    }
    std::uint8_t encode(float x) const {
        const std::uint8_t sign = x < 0 ? 0x80 : 0;
        const float a = std::min(std::fabs(x), v[126]);
        const auto it = std::lower_bound(v.begin(), v.end(), a);
        int c = static_cast<int>(it - v.begin());
        if (c > 0 && (c == 127 || a - v[c - 1] <= v[c] - a)) --c;
        return sign | static_cast<std::uint8_t>(c);
    }
};

class Generator {
public:
    Generator(u64 seed, u32 experts, const Codebook& cb) : seed_(seed), experts_(experts) {
        double sq = 0;
        for (int e = 0; e < Codebook::kEntries; ++e) sq += cb.coord0()[e] * cb.coord0()[e] + cb.coord1()[e] * cb.coord1()[e];
        codebook_rms_ = static_cast<float>(std::sqrt(sq / (2.0 * Codebook::kEntries)));
        // The E4M3 code of 16·√3·(u1+u2+u3+u4 − 2) for four 16-bit uniforms u, by their sum.
        const E4m3Table e4m3;
        fp8_gauss_.resize(4 * 65535 + 1);
        for (std::size_t i = 0; i < fp8_gauss_.size(); ++i)
            fp8_gauss_[i] = e4m3.encode(16.0f * 1.7320508f * (static_cast<float>(i) / 65536.0f - 2.0f));
    }

    u64 tensor_seed(const std::string& name) const { return splitmix64_mix(seed_ ^ xxh3_64(name.data(), name.size())); }

    // Rows [begin, end) of a dense tensor into dst (row-major, element_bytes each).
    void dense_rows(const Spec& s, u64 ts, u64 begin, u64 end, std::uint8_t* dst) const {
        const u64 cols = cols_of(s);
        const std::size_t eb = element_bytes(s.kind);
        for (u64 r = begin; r < end; ++r) {
            Rng rng{splitmix64_mix(ts + r)};
            std::uint8_t* out = dst + (r - begin) * cols * eb;
            switch (s.kind) {
                case Kind::fp8_weight:  // 16·N(0,1) rounded to E4M3: one draw and one lookup a value
                    for (u64 c = 0; c < cols; ++c) {
                        const u64 x = rng.next();
                        out[c] = fp8_gauss_[(x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48)];
                    }
                    break;
                case Kind::fp8_scale: {
                    const int e0 = static_cast<int>(std::lround(std::log2(s.a * std::sqrt(1.6) / 16.0)));
                    for (u64 c = 0; c < cols; ++c) out[c] = static_cast<std::uint8_t>(127 + e0 - int(rng.next() & 1));
                    break;
                }
                case Kind::bf16_gauss:
                case Kind::bf16_uniform:
                    for (u64 c = 0; c < cols; ++c) {
                        const float x = s.kind == Kind::bf16_gauss ? s.a * rng.gauss()
                                                                   : s.a + s.b * (2.0f * rng.uniform() - 1.0f);
                        const std::uint16_t h = float_to_bf16(x);
                        std::memcpy(out + 2 * c, &h, 2);
                    }
                    break;
                case Kind::f32_gauss:
                case Kind::f32_uniform:
                    for (u64 c = 0; c < cols; ++c) {
                        const float x = s.kind == Kind::f32_gauss ? s.a * rng.gauss()
                                                                  : s.a + s.b * (2.0f * rng.uniform() - 1.0f);
                        std::memcpy(out + 4 * c, &x, 4);
                    }
                    break;
                case Kind::f32_values:
                    std::memcpy(out, s.values.data() + r * cols, cols * 4);
                    break;
                case Kind::tid2eid: {
                    std::vector<std::int64_t> chosen;
                    while (chosen.size() < cols) {
                        const auto e = static_cast<std::int64_t>(rng.next() % experts_);
                        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
                    }
                    std::memcpy(out, chosen.data(), cols * 8);
                    break;
                }
            }
        }
    }

    // Rows [begin, end) of a TQ2875 matrix: random index streams, bf16 scales around the one
    // that gives the rows an rms of 1/√cols (unit-variance outputs for unit-variance inputs).
    void expert_rows(u64 ts, u64 cols, u64 begin, u64 end, std::uint8_t* dst) const {
        const std::size_t rb = row_bytes(cols);
        const float base = 1.0f / (std::sqrt(static_cast<float>(cols)) * codebook_rms_);
        for (u64 r = begin; r < end; ++r) {
            Rng rng{splitmix64_mix(ts + r)};
            std::uint8_t* out = dst + (r - begin) * rb;
            for (std::size_t blk = 0; blk < rb / 92; ++blk, out += 92) {
                for (int i = 0; i < 90; i += 8) {
                    const u64 bits = rng.next();
                    std::memcpy(out + i, &bits, std::min(8, 90 - i));
                }
                const std::uint16_t scale = float_to_bf16(base * (0.75f + 0.5f * rng.uniform()));
                std::memcpy(out + 90, &scale, 2);
            }
        }
    }

private:
    u64 seed_;
    u32 experts_;
    float codebook_rms_ = 1;
    std::vector<std::uint8_t> fp8_gauss_;
};

class SpecList {
public:
    std::vector<Spec> specs;
    void fp8(const std::string& prefix, u64 n, u64 k) {
        const float sigma = 1.0f / std::sqrt(static_cast<float>(k));
        specs.push_back({prefix + ".weight", Kind::fp8_weight, {n, k}});
        specs.push_back({prefix + ".scale", Kind::fp8_scale, {(n + 127) / 128, (k + 127) / 128}, sigma});
    }
    void bf16_matrix(const std::string& name, u64 n, u64 k, float sigma = 0) {
        specs.push_back({name, Kind::bf16_gauss, {n, k}, sigma ? sigma : 1.0f / std::sqrt(static_cast<float>(k))});
    }
    void norm(const std::string& name, u64 n) { specs.push_back({name, Kind::bf16_uniform, {n}, 1.0f, 0.1f}); }
    void f32(const std::string& name, std::vector<u64> shape, float centre, float spread) {
        specs.push_back({name, Kind::f32_uniform, std::move(shape), centre, spread});
    }
    // One mHC site: fn outputs of about 0.3 for the unit-rms normalised streams.
    void hyper(const std::string& p, const std::string& site, u64 rows, u64 width) {
        specs.push_back({p + "hc_" + site + "_fn", Kind::f32_gauss, {rows, width}, 0.3f / std::sqrt(float(width))});
        f32(p + "hc_" + site + "_base", {rows}, 0.0f, 0.5f);
        f32(p + "hc_" + site + "_scale", {site == "head" ? u64(1) : u64(3)}, 0.5f, 0.25f);
    }
    void sort() { std::sort(specs.begin(), specs.end(), [](const Spec& a, const Spec& b) { return a.name < b.name; }); }
};

struct Geometry {
    u64 V, D, H, Dh, Rq, G, Ro, Hi, Di, E, k, I, n;
};

SpecList global_specs(const Geometry& g) {
    SpecList s;
    s.bf16_matrix("embed.weight", g.V, g.D, 1.0f);
    s.bf16_matrix("head.weight", g.V, g.D);
    s.norm("norm.weight", g.D);
    s.hyper("", "head", g.n, g.n * g.D);
    s.sort();
    return s;
}

void compressor_specs(SpecList& s, const std::string& p, const Geometry& g, u64 ratio, u64 dim, bool overlap) {
    const u64 width = overlap ? 2 * dim : dim;
    s.bf16_matrix(p + "wkv.weight", width, g.D);
    s.bf16_matrix(p + "wgate.weight", width, g.D);
    s.f32(p + "ape", {ratio, width}, 0.0f, 0.5f);
    s.norm(p + "norm.weight", dim);
}

// skew_bias: a learned layer's gate.bias (skewed_router_bias); empty: the plain small random one.
SpecList layer_specs(const Geometry& g, const std::string& p, int ratio, bool hash, std::vector<float> skew_bias = {}) {
    SpecList s;
    s.norm(p + "attn_norm.weight", g.D);
    s.norm(p + "ffn_norm.weight", g.D);
    s.hyper(p, "attn", (2 + g.n) * g.n, g.n * g.D);
    s.hyper(p, "ffn", (2 + g.n) * g.n, g.n * g.D);
    const std::string a = p + "attn.";
    s.f32(a + "attn_sink", {g.H}, 0.0f, 1.0f);
    s.fp8(a + "wq_a", g.Rq, g.D);
    s.norm(a + "q_norm.weight", g.Rq);
    s.fp8(a + "wq_b", g.H * g.Dh, g.Rq);
    s.fp8(a + "wkv", g.Dh, g.D);
    s.norm(a + "kv_norm.weight", g.Dh);
    s.fp8(a + "wo_a", g.G * g.Ro, g.H * g.Dh / g.G);
    s.fp8(a + "wo_b", g.D, g.G * g.Ro);
    if (ratio != 0) compressor_specs(s, a + "compressor.", g, u64(ratio), g.Dh, ratio == 4);
    if (ratio == 4) {
        s.fp8(a + "indexer.wq_b", g.Hi * g.Di, g.Rq);
        s.bf16_matrix(a + "indexer.weights_proj.weight", g.Hi, g.D);
        compressor_specs(s, a + "indexer.compressor.", g, 4, g.Di, true);
    }
    const std::string f = p + "ffn.";
    s.bf16_matrix(f + "gate.weight", g.E, g.D);
    if (hash) s.specs.push_back({f + "gate.tid2eid", Kind::tid2eid, {g.V, g.k}});
    else if (!skew_bias.empty()) s.specs.push_back({f + "gate.bias", Kind::f32_values, {g.E}, 0, 0, std::move(skew_bias)});
    else s.f32(f + "gate.bias", {g.E}, 0.0f, 0.1f);
    s.fp8(f + "shared_experts.w1", g.I, g.D);
    s.fp8(f + "shared_experts.w2", g.D, g.I);
    s.fp8(f + "shared_experts.w3", g.I, g.D);
    s.sort();
    return s;
}

// The MTP layer (model doc §5.1): a sliding-window layer under "mtp.0." with its input
// projections, norms and hyper head.
SpecList mtp_specs(const Geometry& g) {
    SpecList s = layer_specs(g, "mtp.0.", 0, false);
    s.fp8("mtp.0.e_proj", g.D, g.D);
    s.fp8("mtp.0.h_proj", g.D, g.D);
    s.norm("mtp.0.enorm.weight", g.D);
    s.norm("mtp.0.hnorm.weight", g.D);
    s.norm("mtp.0.norm.weight", g.D);
    s.hyper("mtp.0.", "head", g.n, g.n * g.D);
    s.sort();
    return s;
}

// DSpark stage s of `stages` (model doc §2.5, §5.2): a sliding-window layer under "mtp.s.";
// the first also holds main_proj [D, taps·D] and main_norm, the last the norm, hyper head,
// Markov head [V, r] ×2 and confidence head [1, D + r].
SpecList dspark_specs(const Geometry& g, u32 s, u32 stages, u64 taps, u64 rank) {
    const std::string p = "mtp." + std::to_string(s) + ".";
    SpecList l = layer_specs(g, p, 0, false);
    if (s == 0) {
        l.fp8(p + "main_proj", g.D, taps * g.D);
        l.norm(p + "main_norm.weight", g.D);
    }
    if (s + 1 == stages) {
        l.norm(p + "norm.weight", g.D);
        l.hyper(p, "head", g.n, g.n * g.D);
        l.bf16_matrix(p + "markov_head.markov_w1.weight", g.V, rank);
        l.bf16_matrix(p + "markov_head.markov_w2.weight", g.V, rank);
        l.bf16_matrix(p + "confidence_head.proj.weight", 1, g.D + rank);
    }
    l.sort();
    return l;
}

constexpr u32 kDsparkStages = 3;
constexpr u64 kDsparkRank = 256;

u64 spec_bytes(const Spec& s) {
    u64 n = element_bytes(s.kind);
    for (u64 d : s.shape) n *= d;
    return n;
}

constexpr u64 kChunkBytes = 32ull << 20;  // dense tensors are generated and written in ≤ 32 MiB slices

void write_dense(ContainerWriter& w, const Generator& gen, const Spec& s, ThreadPool& pool, Progress& progress,
                 std::vector<std::uint8_t>& buf, GeometryContainerReport& report) {
    const u64 rows = rows_of(s), row_bytes = spec_bytes(s) / rows;
    const u64 chunk_rows = std::max<u64>(1, kChunkBytes / row_bytes);
    const u64 ts = gen.tensor_seed(s.name);
    w.begin_tensor(s.name, type_of(s.kind), s.shape);
    for (u64 r0 = 0; r0 < rows; r0 += chunk_rows) {
        const u64 r1 = std::min(rows, r0 + chunk_rows);
        buf.resize((r1 - r0) * row_bytes);
        pool.parallel_for(r1 - r0, [&](std::size_t b, std::size_t e) {
            gen.dense_rows(s, ts, r0 + b, r0 + e, buf.data() + b * row_bytes);
        }, 16);
        w.write(buf);
        progress.advance(buf.size());
    }
    w.end_tensor();
    ++report.dense_tensors;
    report.dense_bytes += spec_bytes(s);
}

}  // namespace

std::string dspark_path(const std::string& out_path) {
    constexpr std::string_view ext = ".aff";
    return (out_path.ends_with(ext) ? out_path.substr(0, out_path.size() - ext.size()) : out_path) + ".dspark.aff";
}

std::vector<float> skewed_router_bias(const GeometryContainerOptions& o, int layer, std::uint64_t experts) {
    Rng rng{splitmix64_mix(o.seed ^ (0x5ce3ull << 32) ^ u64(layer))};
    const double s = o.zipf_s + o.zipf_s_spread * (2.0 * rng.uniform() - 1.0);
    std::vector<u64> ranking(experts);
    std::iota(ranking.begin(), ranking.end(), u64(0));
    for (u64 i = experts; i > 1; --i) std::swap(ranking[i - 1], ranking[rng.next() % i]);  // Fisher-Yates
    double sum = 0;
    for (u64 r = 0; r < experts; ++r) sum += std::pow(double(r + 1), -s);
    std::vector<float> bias(experts);
    for (u64 r = 0; r < experts; ++r) {
        const double p = (1 - o.floor) * std::pow(double(r + 1), -s) / sum + o.floor / double(experts);
        bias[ranking[r]] = static_cast<float>(o.skew_scale * std::log(double(experts) * p));
    }
    return bias;
}

GeometryContainerReport write_geometry_container(const GeometryContainerOptions& o, ThreadPool& pool,
                                                 Progress& progress) {
    if (o.out_path.empty()) throw_usage("an output file is required");
    if (std::filesystem::is_directory(o.out_path)) throw_usage("output " + o.out_path + " is a directory");
    nlohmann::json config = deepseek_v4_flash_config();
    const u64 full_layers = config["num_hidden_layers"].get<u64>();
    if (o.layers < 1 || o.layers > full_layers)
        throw_usage("--layers " + std::to_string(o.layers) + " is out of range: DeepSeek-V4-Flash has " +
                    std::to_string(full_layers) + " layers");
    const u64 k = config["num_experts_per_tok"].get<u64>();
    if (o.experts < k || o.experts > 256)
        throw_usage("--experts " + std::to_string(o.experts) + " is out of range [" + std::to_string(k) + ", 256]");
    if (o.vocab < 2 || o.vocab > 129280)
        throw_usage("--vocab " + std::to_string(o.vocab) + " is out of range [2, 129280]");
    if (!(o.zipf_s >= 0 && o.zipf_s <= 8) || !((o.zipf_s_spread >= 0 && o.zipf_s_spread <= o.zipf_s) || o.zipf_s == 0) ||
        !(o.floor >= 0 && o.floor <= 1) || !(o.skew_scale > 0 && o.skew_scale <= 10))
        throw_usage("routing skew out of range: Zipf exponent in [0, 8], spread in [0, exponent], floor in [0, 1], scale in (0, 10]");
    if (o.mtp && o.dspark) throw_usage("--mtp and --dspark both name their stages mtp.*: choose one");
    const std::vector<int> ratios = config["compress_ratios"].get<std::vector<int>>();
    const u64 hash_layers = config["num_hash_layers"].get<u64>();
    config["n_routed_experts"] = o.experts;
    config["vocab_size"] = o.vocab;
    if (o.layers < full_layers) config = truncate_config(config, o.layers, "DeepSeek-V4-Flash config");
    // V4-Flash-0731's dspark_* keys (model doc §1.2) and compress_ratios entries, the taps the last three layers (fewer
    // when the container has fewer), the noise id inside a cut vocabulary.
    GeometryContainerReport report;
    u64 taps = 0;
    if (o.dspark) {
        nlohmann::json tap_ids = nlohmann::json::array();
        for (u32 l = o.layers > 3 ? o.layers - 3 : 0; l < o.layers; ++l) tap_ids.push_back(l), ++taps;
        config["dspark_block_size"] = 5;
        config["dspark_markov_rank"] = kDsparkRank;
        config["dspark_target_layer_ids"] = tap_ids;
        config["dspark_noise_token_id"] = std::min<u64>(128799, o.vocab - 1);
        // One compress_ratios entry a stage after the layers' (0731 has 46: ratio 0, sliding),
        // which is how a container's validation counts its draft stages.
        nlohmann::json& r = config["compress_ratios"];
        while (r.size() < o.layers + kDsparkStages) r.push_back(0);
        report.draft_path = dspark_path(o.out_path);
    }

    const Geometry g{o.vocab, 4096, 64, 512, 1024, 8, 1024, 64, 128, o.experts, k, 2048, 4};
    const CodebookSource cb = builtin_codebook_source();
    const Generator gen(o.seed, o.experts, cb.codebook);

    std::vector<SpecList> groups{global_specs(g)};
    for (u32 l = 0; l < o.layers; ++l) {
        const bool hash = l < hash_layers;
        groups.push_back(layer_specs(g, "layers." + std::to_string(l) + ".", ratios[l], hash,
                                     !hash && o.zipf_s > 0 ? skewed_router_bias(o, int(l), g.E) : std::vector<float>{}));
    }
    if (o.mtp) groups.push_back(mtp_specs(g));  // its router keeps the plain bias (its experts are never tiered)
    const u64 expert_matrix_rows[3] = {g.I, g.D, g.I}, expert_matrix_cols[3] = {g.D, g.I, g.D};
    u64 bytes_per_expert = 0;
    for (int m = 0; m < 3; ++m) bytes_per_expert += matrix_bytes(expert_matrix_rows[m], expert_matrix_cols[m]);

    nlohmann::json quantiser = {
        {"format", "TQ2875"},
        {"format_version", 1},
        {"codebook_id", cb.id},
        {"codebook", "built-in"},
        {"rotation", "off"},
        {"search_passes", 0},
        {"imatrix", false},
        {"layers", o.layers},
        {"source_layers", full_layers},
        {"synthetic", "random index bits and scales, seed " + std::to_string(o.seed)}};
    auto metadata = [&](const char* role) {
        return nlohmann::json{
            {"config", config},
            {"quantiser", quantiser},
            {"provenance",
             {{"tool", o.tool}, {"created", o.created}, {"sources", nlohmann::json::array()}, {"imatrix", nullptr}}},
            {"role", role},
            {"codebook_id", cb.id},
        };
    };

    std::vector<std::uint8_t> buf;
    // One file: groups' dense tensors, each group after the first (`first_key`: 0 for the main
    // container's globals) followed by its experts under key(group index).
    auto write_file = [&](const std::string& path, nlohmann::json meta, const std::vector<SpecList>& file_groups,
                          bool with_codebook, auto&& key_of, const char* what) {
        u64 total = 0;
        for (const SpecList& s : file_groups)
            for (const Spec& t : s.specs) total += spec_bytes(t);
        for (std::size_t gi = 0; gi < file_groups.size(); ++gi)
            if (key_of(gi)) total += bytes_per_expert * o.experts;
        ContainerWriter writer(path);
        writer.set_metadata(std::move(meta));
        if (with_codebook) writer.set_codebook(cb.bytes);
        progress.begin(what, total, "B");
        for (std::size_t gi = 0; gi < file_groups.size(); ++gi) {
            for (const Spec& s : file_groups[gi].specs) write_dense(writer, gen, s, pool, progress, buf, report);
            const std::optional<ExpertKey> group_key = key_of(gi);
            if (!group_key) continue;
            for (u32 e = 0; e < o.experts; ++e) {
                const ExpertKey key{group_key->draft, group_key->layer, e};
                writer.begin_expert(key);
                for (int m = 0; m < 3; ++m) {
                    const std::string name = expert_matrix_name(key, m);
                    const u64 rows = expert_matrix_rows[m], cols = expert_matrix_cols[m], rb = row_bytes(cols);
                    const u64 ts = gen.tensor_seed(name);
                    buf.resize(rows * rb);
                    pool.parallel_for(rows, [&](std::size_t b, std::size_t en) {
                        gen.expert_rows(ts, cols, b, en, buf.data() + b * rb);
                    }, 64);
                    writer.begin_tensor(name, StorageType::TQ2875, {rows, cols});
                    writer.write(buf);
                    writer.end_tensor();
                    report.expert_bytes += buf.size();
                    progress.advance(buf.size());
                }
                writer.end_expert();
                ++report.experts;
            }
        }
        progress.end();
        writer.finish();
        report.file_bytes += std::filesystem::file_size(path);
    };
    write_file(o.out_path, metadata("main"), groups, true, [&](std::size_t gi) -> std::optional<ExpertKey> {
        if (gi == 0) return std::nullopt;
        const bool draft = gi > o.layers;  // the MTP layer's group comes last
        return ExpertKey{draft, draft ? 0u : static_cast<u32>(gi - 1), 0};
    }, "writing");
    if (o.dspark) {
        // As aff-quantize --dspark --codebook MAIN writes it: role "draft", the main
        // container's config and codebook id (no codebook section), only the stages.
        std::vector<SpecList> stages;
        for (u32 s = 0; s < kDsparkStages; ++s) stages.push_back(dspark_specs(g, s, kDsparkStages, taps, kDsparkRank));
        write_file(report.draft_path, metadata("draft"), stages, false, [&](std::size_t gi) -> std::optional<ExpertKey> {
            return ExpertKey{true, static_cast<u32>(gi), 0};
        }, "writing the draft");
    }
    return report;
}

}  // namespace aff::quant
