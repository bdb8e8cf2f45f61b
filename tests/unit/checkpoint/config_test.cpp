// Tests for libaff/checkpoint/config: both config forms give the same geometry, and every
// validation failure names its field.
#include "libaff/core/error.hpp"
#include "libaff/checkpoint/config.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

std::string config_error(nlohmann::json j) {
    try {
        aff::parse_model_config(j, "config.json");
    } catch (const aff::Error& e) {
        return e.what();
    }
    return "(no error)";
}

nlohmann::json tiny_a() {
    std::ifstream in(models + "/tiny-a/config.json");
    return nlohmann::json::parse(in);
}
}  // namespace

TEST_CASE("the transformers and the official config forms give the same model", "[checkpoint]") {
    const aff::ModelConfig a = aff::load_model_config(models + "/tiny-a/config.json");
    const aff::ModelConfig q = aff::load_model_config(models + "/tiny-a-fp8/config.json");
    CHECK(a.hidden_size == 128);
    CHECK(a.rope_dim == 32);
    CHECK(a.num_layers == 6);
    CHECK(a.attention == q.attention);
    CHECK(a.compress_ratio == std::vector<int>{0, 4, 16, 4, 16, 4});
    CHECK(a.compress_ratio == q.compress_ratio);
    CHECK(a.hash_routed == std::vector<bool>{true, true, false, false, false, false});
    CHECK(a.hash_routed == q.hash_routed);
    CHECK(a.rope_compress.yarn);
    CHECK(q.rope_compress.yarn);
    CHECK(a.rope_compress.theta == 160000.0);
    CHECK(q.rope_compress.theta == 160000.0);
    CHECK(a.rope_compress.factor == q.rope_compress.factor);
    CHECK(a.rope_compress.original_max_position == 65536.0);
    CHECK(q.rope_compress.original_max_position == 65536.0);
    CHECK(!a.rope_main.yarn);
    CHECK(a.rope_main.theta == 10000.0);
    CHECK(a.swiglu_limit == 1.0);
    CHECK(a.eos_token_ids == std::vector<int>{1});
    CHECK(q.num_mtp_layers == 1);
}

TEST_CASE("config validation names the field at fault", "[checkpoint][corrupt]") {
    auto j = tiny_a();
    j["o_groups"] = 3;
    CHECK(config_error(j) == "config.json: field o_groups: 3 does not divide num_attention_heads 4");
    j = tiny_a();
    j.erase("hidden_size");
    CHECK(config_error(j) == "config.json: field hidden_size: missing");
    j = tiny_a();
    j["hidden_size"] = "wide";
    CHECK(config_error(j) == "config.json: field hidden_size: expected an integer, got \"wide\"");
    j = tiny_a();
    j["layer_types"][2] = "full_attention";
    CHECK(config_error(j) == "config.json: field layer_types[2]: 'full_attention' is not sliding_attention, "
                             "compressed_sparse_attention or heavily_compressed_attention");
    j = tiny_a();
    j["layer_types"].erase(5);
    CHECK(config_error(j) == "config.json: field layer_types: has 5 entries, num_hidden_layers is 6");
    j = tiny_a();
    j["mlp_layer_types"].erase(5);
    CHECK(config_error(j) == "config.json: field mlp_layer_types: has 5 entries, num_hidden_layers is 6");
    j = tiny_a();
    j["mlp_layer_types"] = "moe";
    CHECK(config_error(j) == "config.json: field mlp_layer_types: expected an array");
    j = tiny_a();
    j["mlp_layer_types"][1] = 7;
    CHECK(config_error(j) == "config.json: field mlp_layer_types[1]: '7' is not hash_moe or moe");
    j = tiny_a();
    j["num_experts_per_tok"] = 9;
    CHECK(config_error(j) == "config.json: field num_experts_per_tok: 9 exceeds n_routed_experts 8");
    j = tiny_a();
    j["qk_rope_head_dim"] = 64;
    CHECK(config_error(j) == "config.json: field qk_rope_head_dim: 64 must be even and less than head_dim 64");
    j = tiny_a();
    j["compress_rates"]["compressed_sparse_attention"] = 8;
    CHECK(config_error(j) == "config.json: field compress_rates: CSA ratio 8 is not 4");
    j = tiny_a();
    j["num_key_value_heads"] = 2;
    CHECK(config_error(j) == "config.json: field num_key_value_heads: must be 1 (one latent serves as K and V)");
    j = tiny_a();
    j["rope_parameters"]["compress"]["rope_type"] = "longrope";
    CHECK(config_error(j) == "config.json: field rope_parameters.compress.rope_type: 'longrope' is not supported (default or yarn)");
    j = tiny_a();
    j.erase("layer_types");
    CHECK(config_error(j) == "config.json: field layer_types: missing (nor compress_ratios)");
}

TEST_CASE("an integer past int64 is reported as written, not wrapped", "[checkpoint]") {
    nlohmann::json j = tiny_a();
    j["vocab_size"] = nlohmann::json::parse("18446744073709551615");
    CHECK(config_error(j) == "config.json: field vocab_size: 18446744073709551615 is out of range [1, 16777216]");
    j["vocab_size"] = nlohmann::json::parse("9223372036854775808");
    CHECK(config_error(j) == "config.json: field vocab_size: 9223372036854775808 is out of range [1, 16777216]");
    j["vocab_size"] = 1e30;
    CHECK(config_error(j) == "config.json: field vocab_size: 1e+30 is out of range [1, 16777216]");
    j["vocab_size"] = -5;
    CHECK(config_error(j) == "config.json: field vocab_size: -5 is out of range [1, 16777216]");
}
