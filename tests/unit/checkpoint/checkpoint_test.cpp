// Tests for libaff/checkpoint: dtype decoding, the safetensors parser on good and
// broken files, name normalisation, and loading the tiny fixtures in all three layouts
// (transformers save_pretrained default, save_original_format=False with fused
// experts, official FP8/FP4 shards) to the same canonical tensors.
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/checkpoint/dtype.hpp"
#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/checkpoint/tensor_names.hpp"
#include "libaff/core/error.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

fs::path temp_dir(const std::string& tag) {
    fs::path dir = fs::temp_directory_path() / ("aff-ckpt-test-" + std::to_string(::getpid()) + "-" + tag);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const aff::Error& e) {
        return e.what();
    }
    return "(no error)";
}

// A safetensors image from a header text and a data size.
std::vector<std::uint8_t> image(const std::string& header, std::size_t data_bytes) {
    std::vector<std::uint8_t> out(8 + header.size() + data_bytes, 0);
    const std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
    std::memcpy(out.data() + 8, header.data(), header.size());
    return out;
}

std::string parse_error(const std::string& header, std::size_t data_bytes) {
    auto img = image(header, data_bytes);
    return error_of([&] { aff::parse_safetensors(img, "x.safetensors"); });
}
}  // namespace

TEST_CASE("small float formats decode to their exact values", "[checkpoint]") {
    CHECK(aff::e4m3_to_f32(0x00) == 0.0f);
    CHECK(aff::e4m3_to_f32(0x38) == 1.0f);          // exponent 7, mantissa 0
    CHECK(aff::e4m3_to_f32(0x7e) == 448.0f);        // max finite
    CHECK(aff::e4m3_to_f32(0xfe) == -448.0f);
    CHECK(aff::e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
    CHECK(std::isnan(aff::e4m3_to_f32(0x7f)));
    CHECK(aff::e8m0_to_f32(127) == 1.0f);
    CHECK(aff::e8m0_to_f32(130) == 8.0f);
    CHECK(aff::e8m0_to_f32(0) == std::ldexp(1.0f, -127));
    CHECK(std::isnan(aff::e8m0_to_f32(255)));
    CHECK(aff::e2m1_to_f32(7) == 6.0f);
    CHECK(aff::e2m1_to_f32(0xd) == -3.0f);
    CHECK(aff::bf16_to_f32(0x3f80) == 1.0f);
    CHECK(aff::f16_to_f32(0x3c00) == 1.0f);
    CHECK(aff::f16_to_f32(0xc000) == -2.0f);
    CHECK(aff::f32_to_bf16(1.0f) == 0x3f80);
    CHECK(aff::f32_to_bf16(1.00390625f) == 0x3f80);  // tie rounds to even
}

TEST_CASE("FP4 unpacks the low nibble first and scales per 32 inputs", "[checkpoint]") {
    // One row of 64: byte j holds (2j, 2j+1); scales 2^0 for cols 0..31, 2^2 for 32..63.
    std::vector<std::uint8_t> packed(32);
    for (int j = 0; j < 32; ++j) packed[j] = static_cast<std::uint8_t>((j % 8) | (((j + 3) % 16) << 4));
    const float scale[2] = {1.0f, 4.0f};
    std::vector<float> out(64);
    aff::dequant_fp4(packed.data(), 1, 64, scale, out.data());
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == 1.5f);          // code 3
    CHECK(out[14] == 6.0f);         // byte 7 low nibble = 7
    CHECK(out[15] == -1.0f);        // byte 7 high nibble = 10: sign + magnitude code 2
    CHECK(out[33] == 1.5f * 4.0f);  // byte 16 high nibble: (16+3)%16 = 3 -> 1.5, second scale group
}

TEST_CASE("FP8 weights are scaled per 128x128 block", "[checkpoint]") {
    std::vector<std::uint8_t> codes(130 * 2, 0x38);  // all 1.0
    const float scale[2] = {2.0f, 0.5f};              // grid [2, 1]
    std::vector<float> out(130 * 2);
    aff::dequant_fp8_block(codes.data(), 130, 2, scale, out.data());
    CHECK(out[0] == 2.0f);
    CHECK(out[127 * 2 + 1] == 2.0f);
    CHECK(out[128 * 2] == 0.5f);
}

TEST_CASE("safetensors parser accepts a well-formed header", "[checkpoint]") {
    auto img = image(R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                     R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12);
    auto t = aff::parse_safetensors(img, "x");
    REQUIRE(t.size() == 2);
    CHECK(t[0].name == "a");
    CHECK(t[0].nbytes == 8);
    CHECK(t[1].dtype == aff::DType::bf16);
    CHECK(t[1].offset == img.size() - 4);
}

TEST_CASE("safetensors parser rejects broken files with the exact reason", "[checkpoint][corrupt]") {
    CHECK(error_of([] { std::vector<std::uint8_t> tiny(3); aff::parse_safetensors(tiny, "x.safetensors"); }) ==
          "x.safetensors: not a safetensors file: 3 bytes, shorter than the 8-byte header length");
    {
        auto img = image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
        img[0] = 0xff;  // header length far past the end
        CHECK(error_of([&] { aff::parse_safetensors(img, "x.safetensors"); }) ==
              "x.safetensors: header length " + std::to_string(0xff + (img[1] << 8)) +
                  " runs past the end of the file (" + std::to_string(img.size()) + " bytes)");
    }
    CHECK(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4) ==
          "x.safetensors: tensor a: data [0, 8) runs past the end of the data (4 bytes; file truncated?)");
    CHECK(parse_error(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8) ==
          "x.safetensors: tensor a: F32 [3] needs 12 bytes, data_offsets give 8");
    CHECK(parse_error(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8) ==
          "x.safetensors: tensor a: unsupported dtype F64");
    CHECK(parse_error(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8) ==
          "x.safetensors: tensor a: shape entry is not a non-negative integer");
    CHECK(parse_error(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8) ==
          "x.safetensors: tensor a: shape overflows");
    CHECK(parse_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 8) ==
          "x.safetensors: tensor b: data overlaps tensor a");
    CHECK(parse_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 8) ==
          "x.safetensors: header is not valid JSON");
    CHECK(parse_error(R"([1,2])", 8) == "x.safetensors: header is not a JSON object");
}

TEST_CASE("transformers and official names map to one canonical name", "[checkpoint]") {
    using K = aff::CanonicalName::Kind;
    auto n = [](const std::string& s) { return aff::canonical_tensor_name(s).name; };
    CHECK(n("model.embed_tokens.weight") == "embed.weight");
    CHECK(n("lm_head.weight") == "head.weight");
    CHECK(n("head.weight") == "head.weight");
    CHECK(n("model.norm.weight") == "norm.weight");
    CHECK(n("model.hc_head.hc_fn") == "hc_head_fn");
    CHECK(n("model.layers.3.attn.norm.weight") == "layers.3.attn.kv_norm.weight");
    CHECK(n("layers.3.attn.kv_norm.weight") == "layers.3.attn.kv_norm.weight");
    CHECK(n("layers.3.attn.compressor.norm.weight") == "layers.3.attn.compressor.norm.weight");
    CHECK(n("model.layers.0.self_attn.q_a_proj.weight") == "layers.0.attn.wq_a.weight");
    CHECK(n("model.layers.0.self_attn.q_a_proj.weight_scale_inv") == "layers.0.attn.wq_a.scale");
    CHECK(n("model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight") ==
          "layers.1.attn.indexer.weights_proj.weight");
    CHECK(n("model.layers.1.self_attn.compressor.indexer.position_bias") == "layers.1.attn.indexer.compressor.ape");
    CHECK(n("model.layers.1.self_attn.compressor.kv_norm.weight") == "layers.1.attn.compressor.norm.weight");
    CHECK(n("model.layers.2.mlp.gate.e_score_correction_bias") == "layers.2.ffn.gate.bias");
    CHECK(n("model.layers.2.mlp.shared_experts.up_proj.weight") == "layers.2.ffn.shared_experts.w3.weight");
    CHECK(n("model.layers.2.attn_hc.fn") == "layers.2.hc_attn_fn");
    CHECK(n("model.layers.2.input_layernorm.weight") == "layers.2.attn_norm.weight");
    CHECK(n("mtp.0.e_proj.scale") == "mtp.0.e_proj.scale");
    CHECK(aff::canonical_tensor_name("model.layers.4.mlp.experts.gate_up_proj").kind == K::fused_gate_up);
    CHECK(n("model.layers.4.mlp.experts.down_proj") == "layers.4.ffn.experts.");
}

TEST_CASE("the three layouts of the tiny model load to the same canonical tensors", "[checkpoint]") {
    aff::Checkpoint tf(models + "/tiny-a");
    aff::Checkpoint q(models + "/tiny-a-fp8");
    aff::Checkpoint fused(models + "/tiny-c");
    CHECK(tf.has("layers.1.attn.indexer.compressor.ape"));
    CHECK(fused.has("layers.3.ffn.experts.5.w3.weight"));
    CHECK(q.has("mtp.0.e_proj.scale"));
    // Every non-MTP official tensor of the quantised copy has a twin in the transformers save.
    int checked = 0, exact = 0;
    for (const std::string& name : q.names()) {
        if (name.starts_with("mtp.") || name.ends_with(".scale") && !name.ends_with("hc_attn_scale") &&
                                            !name.ends_with("hc_ffn_scale") && name != "hc_head_scale")
            continue;
        INFO(name);
        REQUIRE(tf.has(name));
        const aff::TensorView& v = q.tensor(name);
        std::vector<std::uint64_t> shape = v.shape;
        if (v.dtype == aff::DType::i64) {
            CHECK(q.read_i64(name, shape) == tf.read_i64(name, shape));
            continue;
        }
        if (v.dtype == aff::DType::i8) shape[1] *= 2;
        const auto a = q.read_f32(name, shape), b = tf.read_f32(name, shape);
        double max_diff = 0, max_abs = 0;
        for (std::size_t i = 0; i < a.size(); ++i) {
            max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
            max_abs = std::max(max_abs, double(std::fabs(b[i])));
        }
        // Plain tensors are bit-identical; FP8 loses ~2^-4 relative, FP4 ~1/4 of the block max.
        const double bound = v.dtype == aff::DType::f8_e4m3 ? 0.07 * max_abs : v.dtype == aff::DType::i8 ? 0.5 * max_abs : 0;
        CHECK(max_diff <= bound);
        ++checked;
        exact += max_diff == 0;
    }
    CHECK(checked > 150);
    CHECK(exact > 50);
}

TEST_CASE("fused transformers expert tensors split into w1 (gate rows first), w3 and w2", "[checkpoint]") {
    aff::Checkpoint fused(models + "/tiny-c");
    const aff::TensorView& w1 = fused.tensor("layers.1.ffn.experts.2.w1.weight");
    const aff::TensorView& w3 = fused.tensor("layers.1.ffn.experts.2.w3.weight");
    const aff::TensorView& w2 = fused.tensor("layers.1.ffn.experts.2.w2.weight");
    CHECK(w1.stored_name == "model.layers.1.mlp.experts.gate_up_proj");
    CHECK(w1.shape == std::vector<std::uint64_t>{32, 64});
    CHECK(w3.data == w1.data + 32 * 64 * 2);  // BF16
    CHECK(w2.shape == std::vector<std::uint64_t>{64, 32});
    const aff::TensorView& all = w1;
    CHECK(all.dtype == aff::DType::bf16);
}

TEST_CASE("bad checkpoints fail with one line naming the file and the tensor", "[checkpoint][corrupt]") {
    const fs::path src = models + "/tiny-a-fp8";
    SECTION("missing shard") {
        fs::path d = temp_dir("shard");
        for (auto& f : fs::directory_iterator(src))
            if (f.path().filename() != "model-00002-of-00002.safetensors") fs::copy(f.path(), d / f.path().filename());
        CHECK(error_of([&] { aff::Checkpoint c(d.string()); }) ==
              (d / "model.safetensors.index.json").string() +
                  ": missing shard model-00002-of-00002.safetensors (listed for tensor layers.3.attn.attn_sink)");
        fs::remove_all(d);
    }
    SECTION("truncated shard") {
        fs::path d = temp_dir("trunc");
        fs::copy(src, d, fs::copy_options::recursive);
        const fs::path shard = d / "model-00002-of-00002.safetensors";
        fs::resize_file(shard, fs::file_size(shard) - 1000);
        const std::string e = error_of([&] { aff::Checkpoint c(d.string()); });
        CHECK(e.starts_with(shard.string() + ": tensor "));
        CHECK(e.find("runs past the end of the data") != std::string::npos);
        fs::remove_all(d);
    }
    SECTION("index names a tensor the shard lacks") {
        fs::path d = temp_dir("index");
        fs::copy(src, d, fs::copy_options::recursive);
        std::ifstream in(d / "model.safetensors.index.json");
        std::string text((std::istreambuf_iterator<char>(in)), {});
        in.close();
        const std::string from = "\"layers.0.attn.attn_sink\": \"model-00001-of-00002.safetensors\"";
        REQUIRE(text.find(from) != std::string::npos);
        text.replace(text.find(from), from.size(), "\"layers.0.attn.attn_sink\": \"model-00002-of-00002.safetensors\"");
        std::ofstream(d / "model.safetensors.index.json") << text;
        CHECK(error_of([&] { aff::Checkpoint c(d.string()); }) ==
              (d / "model-00002-of-00002.safetensors").string() +
                  ": tensor layers.0.attn.attn_sink: listed in model.safetensors.index.json but absent from the shard");
        fs::remove_all(d);
    }
    SECTION("wrong shape and missing tensor") {
        aff::Checkpoint c(src.string());
        CHECK(error_of([&] { c.read_f32("layers.0.attn.wq_a.weight", {64, 256}); }) ==
              (src / "model-00001-of-00002.safetensors").string() +
                  ": tensor layers.0.attn.wq_a.weight: shape [64, 128], expected [64, 256]");
        CHECK(error_of([&] { c.read_f32("layers.9.attn.wq_a.weight", {64, 128}); }) ==
              (src / "model.safetensors.index.json").string() + ": missing tensor layers.9.attn.wq_a.weight");
        CHECK(error_of([&] { c.read_i64("layers.0.attn.attn_sink", {4}); }) ==
              (src / "model-00001-of-00002.safetensors").string() +
                  ": tensor layers.0.attn.attn_sink: dtype F32, expected I64");
    }
    SECTION("transformers names report the stored name too") {
        aff::Checkpoint c(models + "/tiny-c");
        CHECK(error_of([&] { c.read_f32("layers.0.attn.wq_a.weight", {1, 1}); }) ==
              models + "/tiny-c/model.safetensors: tensor model.layers.0.self_attn.q_a_proj.weight "
                       "(layers.0.attn.wq_a.weight): shape [32, 64], expected [1, 1]");
    }
    SECTION("no checkpoint files") {
        fs::path d = temp_dir("empty");
        std::ofstream(d / "config.json") << "{}";
        CHECK(error_of([&] { aff::Checkpoint c(d.string()); }) ==
              d.string() + ": no model.safetensors or model.safetensors.index.json");
        fs::remove_all(d);
    }
}

TEST_CASE("a read spread over a thread pool gives the serial read's values bit for bit", "[checkpoint]") {
    aff::ThreadPool pool(3);
    int checked = 0, split = 0;
    for (const char* name : {"tiny-a", "tiny-a-fp8"}) {
        aff::Checkpoint ck(models + "/" + name);
        for (const std::string& t : ck.names()) {
            const aff::TensorView& v = ck.tensor(t);
            if (t.ends_with(".scale") || v.shape.size() != 2 ||
                !(v.dtype == aff::DType::i8 || v.dtype == aff::DType::f8_e4m3 || v.dtype == aff::DType::bf16 ||
                  v.dtype == aff::DType::f32))
                continue;
            INFO(name << " " << t);
            std::vector<std::uint64_t> shape = v.shape;
            if (v.dtype == aff::DType::i8) shape[1] *= 2;
            const std::size_t n = shape[0] * shape[1];
            std::vector<float> a(n), b(n, -1.0f);
            ck.read_f32_into(t, shape, a.data());
            ck.read_f32_into(t, shape, b.data(), pool);
            CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
            ++checked;
            // Tensors the pool really splits: FP4 in parts of 16 rows, FP8 of 128 (its scale blocks).
            split += v.dtype == aff::DType::i8 ? shape[0] > 16 : v.dtype == aff::DType::f8_e4m3 ? shape[0] > 128 : n > 65536;
        }
    }
    CHECK(checked > 100);
    CHECK(split > 10);
}
