// Reading and validating config.json (see config.hpp for the two accepted forms).
#include "libaff/checkpoint/config.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/mapped_file.hpp"

#include <cmath>
#include <limits>

namespace aff {

namespace {
class Reader {
public:
    Reader(const nlohmann::json& j, const std::string& path) : j_(j), path_(path) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw_format("field " + field + ": " + what, path_);
    }
    bool has(const std::string& f) const { return j_.contains(f) && !j_.at(f).is_null(); }

    std::int64_t integer(const nlohmann::json& v, const std::string& field, std::int64_t lo, std::int64_t hi) const {
        if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
            fail(field, "expected an integer, got " + v.dump());
        // Compared as what the file holds (an unsigned above 2^63 or a float past int64's
        // range would wrap if converted first, and print as a negative number).
        const bool in_range = v.is_number_unsigned()  ? v.get<std::uint64_t>() <= std::uint64_t(std::max<std::int64_t>(hi, 0)) &&
                                                            std::int64_t(v.get<std::uint64_t>()) >= lo
                              : v.is_number_integer() ? v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi
                                                      : v.get<double>() >= double(lo) && v.get<double>() <= double(hi);
        if (!in_range)
            fail(field, v.dump() + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return v.is_number_integer() ? v.get<std::int64_t>() : static_cast<std::int64_t>(v.get<double>());
    }
    int req_int(const std::string& f, std::int64_t lo = 1, std::int64_t hi = 1 << 24) const {
        if (!has(f)) fail(f, "missing");
        return static_cast<int>(integer(j_.at(f), f, lo, hi));
    }
    int opt_int(const std::string& f, int def, std::int64_t lo = 0, std::int64_t hi = 1 << 24) const {
        return has(f) ? static_cast<int>(integer(j_.at(f), f, lo, hi)) : def;
    }
    double number(const nlohmann::json& v, const std::string& field) const {
        if (!v.is_number()) fail(field, "expected a number, got " + v.dump());
        const double x = v.get<double>();
        if (!std::isfinite(x)) fail(field, "not finite");
        return x;
    }
    double opt_num(const std::string& f, double def) const { return has(f) ? number(j_.at(f), f) : def; }
    bool opt_bool(const std::string& f, bool def) const {
        if (!has(f)) return def;
        if (!j_.at(f).is_boolean()) fail(f, "expected true or false");
        return j_.at(f).get<bool>();
    }
    const nlohmann::json& at(const std::string& f) const { return j_.at(f); }
    // The array f, one entry a layer: at least n entries (more are ignored).
    const nlohmann::json& per_layer(const std::string& f, int n) const {
        const nlohmann::json& a = j_.at(f);
        if (!a.is_array()) fail(f, "expected an array");
        if (static_cast<int>(a.size()) < n)
            fail(f, "has " + std::to_string(a.size()) + " entries, num_hidden_layers is " + std::to_string(n));
        return a;
    }
    // An entry meant to be a string: its text, else its JSON (for the error that follows).
    static std::string text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

private:
    const nlohmann::json& j_;
    const std::string& path_;
};

// The dspark_* keys (DsparkConfig); defaults as the model doc gives them. Taps must be
// distinct trunk layers in increasing order (the concatenation's order is theirs).
void read_dspark(const Reader& r, ModelConfig& c) {
    DsparkConfig& d = c.dspark;
    d.keys = r.has("dspark_block_size") || r.has("dspark_noise_token_id") || r.has("dspark_target_layer_ids") ||
             r.has("dspark_markov_rank");
    d.block_size = r.opt_int("dspark_block_size", 5, 1, 64);
    d.markov_rank = r.opt_int("dspark_markov_rank", 256, 1, 1 << 16);
    d.tap_layers.clear();
    if (r.has("dspark_target_layer_ids")) {
        const nlohmann::json& a = r.at("dspark_target_layer_ids");
        if (!a.is_array() || a.empty()) r.fail("dspark_target_layer_ids", "expected a non-empty array of layer ids");
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::string f = "dspark_target_layer_ids[" + std::to_string(i) + "]";
            const int l = static_cast<int>(r.integer(a[i], f, 0, c.num_layers - 1));
            if (!d.tap_layers.empty() && l <= d.tap_layers.back())
                r.fail(f, std::to_string(l) + " does not follow " + std::to_string(d.tap_layers.back()) +
                              " (taps are distinct layers in increasing order)");
            d.tap_layers.push_back(l);
        }
    } else {
        for (int l = std::max(0, c.num_layers - 3); l < c.num_layers; ++l) d.tap_layers.push_back(l);
    }
    if (r.has("dspark_noise_token_id")) {
        d.noise_token_id = r.opt_int("dspark_noise_token_id", 0, 0, c.vocab_size - 1);
    } else if (d.keys && d.noise_token_id >= c.vocab_size) {
        r.fail("dspark_noise_token_id", "missing, and the default 128799 is outside the vocabulary of " +
                                            std::to_string(c.vocab_size));
    }
}

void read_rope(const Reader& r, const nlohmann::json& p, const std::string& field, RopeParameters& t) {
    if (!p.is_object()) r.fail(field, "expected an object");
    std::string type = "default";
    if (p.contains("rope_type")) type = p.at("rope_type").is_string() ? p.at("rope_type").get<std::string>() : "?";
    else if (p.contains("type")) type = p.at("type").is_string() ? p.at("type").get<std::string>() : "?";
    if (p.contains("rope_theta")) t.theta = r.number(p.at("rope_theta"), field + ".rope_theta");
    if (type == "default") {
        t.yarn = false;
    } else if (type == "yarn") {
        t.yarn = true;
        auto num = [&](const char* k, double def) {
            return p.contains(k) && !p.at(k).is_null() ? r.number(p.at(k), field + "." + k) : def;
        };
        t.factor = num("factor", 1.0);
        t.original_max_position = num("original_max_position_embeddings", 0.0);
        t.beta_fast = num("beta_fast", 32.0);
        t.beta_slow = num("beta_slow", 1.0);
        t.attention_factor = num("attention_factor", 1.0);
        if (t.factor < 1.0) r.fail(field + ".factor", "must be at least 1");
        if (t.original_max_position <= 0) r.fail(field + ".original_max_position_embeddings", "missing or not positive");
    } else {
        r.fail(field + ".rope_type", "'" + type + "' is not supported (default or yarn)");
    }
    if (t.theta <= 1.0) r.fail(field + ".rope_theta", "must be greater than 1");
}
}  // namespace

ModelConfig parse_model_config(const nlohmann::json& j, const std::string& path) {
    if (!j.is_object()) throw_format("config is not a JSON object", path);
    Reader r(j, path);
    ModelConfig c;
    if (r.has("model_type") && !(r.at("model_type").is_string() && r.at("model_type").get<std::string>() == "deepseek_v4"))
        r.fail("model_type", r.at("model_type").dump() + " is not \"deepseek_v4\"");
    c.vocab_size = r.req_int("vocab_size");
    c.hidden_size = r.req_int("hidden_size");
    c.num_layers = r.req_int("num_hidden_layers", 1, 4096);
    c.num_heads = r.req_int("num_attention_heads");
    if (r.has("num_key_value_heads") && r.req_int("num_key_value_heads") != 1)
        r.fail("num_key_value_heads", "must be 1 (one latent serves as K and V)");
    c.head_dim = r.req_int("head_dim");
    if (r.has("qk_rope_head_dim")) {
        c.rope_dim = r.req_int("qk_rope_head_dim");
    } else if (r.has("partial_rotary_factor")) {
        const double f = r.opt_num("partial_rotary_factor", 0);
        c.rope_dim = static_cast<int>(c.head_dim * f);
        if (f <= 0 || f > 1) r.fail("partial_rotary_factor", "must be in (0, 1]");
    } else {
        r.fail("qk_rope_head_dim", "missing (nor partial_rotary_factor)");
    }
    c.q_lora_rank = r.req_int("q_lora_rank");
    c.o_groups = r.req_int("o_groups");
    c.o_lora_rank = r.req_int("o_lora_rank");
    c.sliding_window = r.req_int("sliding_window");

    // Per-layer attention kind and compression ratio.
    const int L = c.num_layers;
    if (r.has("layer_types")) {
        const auto& lt = r.per_layer("layer_types", L);
        int csa = 4, hca = 128;
        if (r.has("compress_rates")) {
            const auto& cr = r.at("compress_rates");
            if (!cr.is_object()) r.fail("compress_rates", "expected an object");
            if (cr.contains("compressed_sparse_attention"))
                csa = static_cast<int>(r.integer(cr.at("compressed_sparse_attention"), "compress_rates.compressed_sparse_attention", 1, 1 << 20));
            if (cr.contains("heavily_compressed_attention"))
                hca = static_cast<int>(r.integer(cr.at("heavily_compressed_attention"), "compress_rates.heavily_compressed_attention", 1, 1 << 20));
        }
        for (int i = 0; i < L; ++i) {
            const std::string s = Reader::text(lt[static_cast<std::size_t>(i)]);
            const std::string f = "layer_types[" + std::to_string(i) + "]";
            if (s == "sliding_attention") c.attention.push_back(AttentionKind::sliding), c.compress_ratio.push_back(0);
            else if (s == "compressed_sparse_attention") c.attention.push_back(AttentionKind::csa), c.compress_ratio.push_back(csa);
            else if (s == "heavily_compressed_attention") c.attention.push_back(AttentionKind::hca), c.compress_ratio.push_back(hca);
            else r.fail(f, "'" + s + "' is not sliding_attention, compressed_sparse_attention or heavily_compressed_attention");
        }
    } else if (r.has("compress_ratios")) {
        const auto& cr = r.per_layer("compress_ratios", L);
        for (int i = 0; i < L; ++i) {
            const int ratio = static_cast<int>(r.integer(cr[static_cast<std::size_t>(i)], "compress_ratios[" + std::to_string(i) + "]", 0, 1 << 20));
            c.compress_ratio.push_back(ratio);
            c.attention.push_back(ratio == 0 ? AttentionKind::sliding : ratio == 4 ? AttentionKind::csa : AttentionKind::hca);
        }
    } else {
        r.fail("layer_types", "missing (nor compress_ratios)");
    }
    for (int i = 0; i < L; ++i) {
        const std::string f = r.has("layer_types") ? "compress_rates" : "compress_ratios[" + std::to_string(i) + "]";
        if (c.attention[i] == AttentionKind::csa && c.compress_ratio[i] != 4)
            r.fail(f, "CSA ratio " + std::to_string(c.compress_ratio[i]) + " is not 4");
        if (c.attention[i] == AttentionKind::hca && (c.compress_ratio[i] < 2 || c.compress_ratio[i] == 4))
            r.fail(f, "HCA ratio " + std::to_string(c.compress_ratio[i]) + " must be at least 2 and not 4");
    }

    if (r.has("mlp_layer_types")) {
        const auto& mt = r.per_layer("mlp_layer_types", L);
        for (int i = 0; i < L; ++i) {
            const std::string s = Reader::text(mt[static_cast<std::size_t>(i)]);
            if (s != "hash_moe" && s != "moe")
                r.fail("mlp_layer_types[" + std::to_string(i) + "]", "'" + s + "' is not hash_moe or moe");
            c.hash_routed.push_back(s == "hash_moe");
        }
    } else if (r.has("num_hash_layers")) {
        const int n = r.req_int("num_hash_layers", 0, L);
        for (int i = 0; i < L; ++i) c.hash_routed.push_back(i < n);
    } else {
        r.fail("mlp_layer_types", "missing (nor num_hash_layers)");
    }

    c.index_heads = r.req_int("index_n_heads");
    c.index_head_dim = r.req_int("index_head_dim");
    c.index_topk = r.req_int("index_topk");
    c.n_routed_experts = r.req_int("n_routed_experts");
    c.n_shared_experts = r.opt_int("n_shared_experts", 1, 0, 1);
    c.experts_per_token = r.req_int("num_experts_per_tok");
    c.moe_intermediate_size = r.req_int("moe_intermediate_size");
    if (r.has("scoring_func")) {
        const auto& s = r.at("scoring_func");
        if (!s.is_string() || s.get<std::string>() != "sqrtsoftplus")
            r.fail("scoring_func", s.dump() + " is not supported (sqrtsoftplus)");
    }
    if (r.has("hidden_act") && !(r.at("hidden_act").is_string() && r.at("hidden_act").get<std::string>() == "silu"))
        r.fail("hidden_act", r.at("hidden_act").dump() + " is not supported (silu)");
    c.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
    c.routed_scaling_factor = r.opt_num("routed_scaling_factor", 1.5);
    c.swiglu_limit = r.opt_num("swiglu_limit", 10.0);
    if (c.swiglu_limit <= 0) r.fail("swiglu_limit", "must be positive");
    c.hc_mult = r.req_int("hc_mult", 1, 64);
    c.hc_sinkhorn_iters = r.opt_int("hc_sinkhorn_iters", 20, 1, 1000);
    c.hc_eps = r.opt_num("hc_eps", 1e-6);
    c.rms_norm_eps = r.opt_num("rms_norm_eps", 1e-6);
    if (c.hc_eps < 0) r.fail("hc_eps", "must not be negative");
    if (c.rms_norm_eps <= 0) r.fail("rms_norm_eps", "must be positive");

    // RoPE: rope_parameters {main, compress} (transformers) or the flat official keys.
    c.rope_main.theta = r.opt_num("rope_theta", 10000.0);
    c.rope_compress.theta = r.opt_num("compress_rope_theta", 160000.0);
    const auto& rp = r.has("rope_parameters") ? r.at("rope_parameters") : nlohmann::json();
    if (rp.is_object() && rp.contains("main") && rp.contains("compress")) {
        read_rope(r, rp.at("main"), "rope_parameters.main", c.rope_main);
        read_rope(r, rp.at("compress"), "rope_parameters.compress", c.rope_compress);
        if (c.rope_main.yarn) r.fail("rope_parameters.main.rope_type", "YaRN applies only to the compress table");
    } else {
        const nlohmann::json& scaling = r.has("rope_scaling") ? r.at("rope_scaling") : rp;
        if (scaling.is_object()) read_rope(r, scaling, r.has("rope_scaling") ? "rope_scaling" : "rope_parameters", c.rope_compress);
        c.rope_compress.theta = r.opt_num("compress_rope_theta", 160000.0);
    }
    c.max_position_embeddings = r.opt_int("max_position_embeddings", 1 << 20, 1, std::numeric_limits<int>::max());
    c.num_mtp_layers = r.opt_int("num_nextn_predict_layers", 0, 0, 16);
    read_dspark(r, c);
    c.bos_token_id = r.opt_int("bos_token_id", 0, 0, c.vocab_size - 1);
    if (r.has("eos_token_id")) {
        const auto& e = r.at("eos_token_id");
        if (e.is_array()) {
            for (std::size_t i = 0; i < e.size(); ++i)
                c.eos_token_ids.push_back(static_cast<int>(r.integer(e[i], "eos_token_id[" + std::to_string(i) + "]", 0, c.vocab_size - 1)));
        } else {
            c.eos_token_ids.push_back(static_cast<int>(r.integer(e, "eos_token_id", 0, c.vocab_size - 1)));
        }
    }
    c.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);

    // Constraints between values (model doc §1.4, §8.3).
    if (c.head_dim % 2) r.fail("head_dim", std::to_string(c.head_dim) + " is odd");
    if (c.rope_dim % 2 || c.rope_dim >= c.head_dim)
        r.fail("qk_rope_head_dim", std::to_string(c.rope_dim) + " must be even and less than head_dim " + std::to_string(c.head_dim));
    if (c.rope_dim >= c.index_head_dim)
        r.fail("index_head_dim", std::to_string(c.index_head_dim) + " must exceed qk_rope_head_dim " + std::to_string(c.rope_dim));
    if (c.num_heads % c.o_groups)
        r.fail("o_groups", std::to_string(c.o_groups) + " does not divide num_attention_heads " + std::to_string(c.num_heads));
    if (c.experts_per_token > c.n_routed_experts)
        r.fail("num_experts_per_tok", std::to_string(c.experts_per_token) + " exceeds n_routed_experts " + std::to_string(c.n_routed_experts));
    return c;
}

ModelConfig load_model_config(const std::string& path) {
    MappedFile f(path);
    const char* text = reinterpret_cast<const char*>(f.data());
    nlohmann::json j = nlohmann::json::parse(text, text + f.size(), nullptr, false);
    if (j.is_discarded()) throw_format("not valid JSON", path);
    return parse_model_config(j, path);
}

}  // namespace aff
