// Tests for quantize_checkpoint (libaff/quant/quantize_model.cpp) on the tiny
// checkpoints of tests/data/models: every tensor that is not a routed expert is the
// checkpoint's stored bytes, every expert decodes close to the original, the output
// is the same at any thread count, --layers and the draft container are consistent,
// and imatrix problems are named.
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/progress.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/quant/codebook_source.hpp"
#include "libaff/quant/config_truncate.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/quant/quantize_model.hpp"
#include "libaff/quant/quantize_plan.hpp"
#include "unit/quant/background_search.hpp"
#include "unit/quant/imatrix_writer.hpp"

#include "../file_bytes.hpp"
#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace aff::quant;

namespace {

using aff::test::TempDir;

std::string model(const std::string& name) { return std::string(AFF_TEST_DATA) + "/models/" + name; }

using aff::test::read_all;
using aff::test::write_all;

struct NoteLog final : aff::Progress {
    std::vector<std::string> notes;
    void begin(const std::string&, std::uint64_t, const std::string&) override {}
    void advance(std::uint64_t) override {}
    void end() override {}
    void note(const std::string& line) override { notes.push_back(line); }
};

QuantizeOptions options(const std::string& src, const std::string& out) {
    QuantizeOptions o;
    o.src_dir = src;
    o.out_path = out;
    o.tool = "aff-quantize test";
    o.created = "2026-11-29T00:00:00Z";
    return o;
}

QuantizeReport run(const QuantizeOptions& o, std::size_t threads = 2, aff::Progress& p = aff::null_progress()) {
    aff::ThreadPool pool(threads);
    return quantize_checkpoint(o, pool, p);
}

// Every non-expert tensor of `c` is the checkpoint's stored tensor, byte for byte; every
// expert matrix decodes within `bound` NMSE of the checkpoint's values. Returns the
// number of expert matrices checked.
std::size_t check_against_checkpoint(const aff::Container& c, const aff::Checkpoint& ck, const Codebook& cb,
                                     double bound) {
    std::size_t matrices = 0;
    for (const aff::TensorInfo& t : c.tensors()) {
        INFO(t.name);
        if (t.extent < 0) {
            const aff::TensorView& v = ck.tensor(t.name);
            CHECK(t.type == storage_type_of(v.dtype, t.name));
            CHECK(t.shape == v.shape);
            REQUIRE(t.length == v.nbytes);
            const auto bytes = c.bytes(t);
            CHECK(std::equal(bytes.begin(), bytes.end(), v.data));
            continue;
        }
        REQUIRE((t.type == aff::StorageType::TQ2875 || t.type == aff::StorageType::TQ2875R));
        REQUIRE(t.shape.size() == 2);
        const std::size_t rows = t.shape[0], cols = t.shape[1];
        const std::vector<float> w = ck.read_f32(t.name, {rows, cols});
        const auto bytes = c.bytes(t);
        std::vector<float> back(cols);
        double err = 0, ref = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            dequantize_row(bytes.subspan(r * row_bytes(cols), row_bytes(cols)), cols,
                           t.type == aff::StorageType::TQ2875R, cb, back.data());
            for (std::size_t j = 0; j < cols; ++j) {
                const double d = w[r * cols + j] - back[j];
                err += d * d;
                ref += double(w[r * cols + j]) * w[r * cols + j];
            }
        }
        CHECK(err / ref < bound);
        ++matrices;
    }
    return matrices;
}

}  // namespace

TEST_CASE("quantize: tiny-a keeps every dense tensor's bytes and quantises every routed expert", "[quant]") {
    TempDir dir;
    const QuantizeReport r = run(options(model("tiny-a"), dir / "m.aff"));
    const aff::Container c = aff::Container::open(dir / "m.aff");
    const aff::Checkpoint ck(model("tiny-a"));
    CHECK(c.experts().size() == 6 * 8);
    CHECK(r.experts == 6 * 8);
    CHECK(r.matrices == 6 * 8 * 3);
    CHECK(check_against_checkpoint(c, ck, Codebook::builtin(), 0.06) == 6 * 8 * 3);
    CHECK(r.nmse < 0.04);
    // Every tensor of the checkpoint is in the container (tiny-a has no MTP layer).
    CHECK(c.tensors().size() == ck.names().size());
    for (const aff::ExpertExtent& x : c.experts()) CHECK(x.tensors.size() == 3);

    const nlohmann::json& m = c.metadata();
    CHECK(m.at("role") == "main");
    CHECK(m.at("config") == ck.config_json());
    CHECK(m.at("codebook_id") == builtin_codebook_source().id);
    CHECK(c.codebook_id() == builtin_codebook_source().id);
    CHECK(m.at("quantiser").at("imatrix") == false);
    CHECK(m.at("quantiser").at("layers") == 6);
    CHECK(m.at("provenance").at("tool") == "aff-quantize test");
    CHECK(m.at("provenance").at("created") == "2026-11-29T00:00:00Z");
    CHECK(m.at("provenance").at("imatrix").is_null());
    const auto& sources = m.at("provenance").at("sources");
    REQUIRE(sources.size() == 2);
    CHECK(sources[0].at("file") == "config.json");
    CHECK(sources[1].at("file") == "model.safetensors");
    const auto cfg = read_all(model("tiny-a") + "/config.json");
    CHECK(sources[0].at("sha256") == aff::to_hex(aff::sha256(cfg.data(), cfg.size())));
    CHECK_FALSE(c.tokenizer_json());
    CHECK_FALSE(c.expert_profile());
}

TEST_CASE("quantize: FP4 experts and FP8 dense weights of tiny-a-fp8; the trunk only", "[quant]") {
    TempDir dir;
    run(options(model("tiny-a-fp8"), dir / "m.aff"));
    const aff::Container c = aff::Container::open(dir / "m.aff");
    const aff::Checkpoint ck(model("tiny-a-fp8"));
    CHECK(check_against_checkpoint(c, ck, Codebook::builtin(), 0.06) == 6 * 8 * 3);
    CHECK(c.tensor("layers.0.attn.wq_a.weight").type == aff::StorageType::F8_E4M3);
    CHECK(c.tensor("layers.0.attn.wq_a.scale").type == aff::StorageType::F8_E8M0);
    CHECK(c.tensor("layers.0.ffn.gate.tid2eid").type == aff::StorageType::I64);
    CHECK(c.tensor("hc_head_fn").type == aff::StorageType::F32);
    CHECK_FALSE(c.find("layers.0.ffn.experts.0.w1.scale"));  // consumed by dequantisation
    for (const aff::TensorInfo& t : c.tensors()) CHECK_FALSE(t.name.starts_with("mtp."));
    const auto& sources = c.metadata().at("provenance").at("sources");
    REQUIRE(sources.size() == 4);
    CHECK(sources[1].at("file") == "model.safetensors.index.json");
    CHECK(sources[3].at("file") == "model-00002-of-00002.safetensors");
}

TEST_CASE("quantize: the draft container holds the mtp stages against the main codebook", "[quant]") {
    TempDir dir;
    run(options(model("tiny-a-fp8"), dir / "m.aff"));
    QuantizeOptions o = options(model("tiny-a-fp8"), dir / "d.aff");
    o.draft = true;
    o.codebook_path = dir / "m.aff";
    o.imatrix_path = dir / "not-read.gguf";
    NoteLog log;
    const QuantizeReport r = run(o, 2, log);
    CHECK(r.experts == 8);
    REQUIRE(log.notes.size() == 1);
    CHECK(log.notes[0].starts_with("--imatrix is ignored for a draft container"));
    const aff::Container main = aff::Container::open(dir / "m.aff");
    const aff::Container d = aff::Container::open(dir / "d.aff");
    CHECK(d.metadata().at("role") == "draft");
    CHECK_FALSE(d.codebook());
    CHECK(d.codebook_id() == main.codebook_id());
    CHECK(d.metadata().at("quantiser").at("codebook") == "main container m.aff");
    for (const aff::TensorInfo& t : d.tensors()) CHECK(t.name.starts_with("mtp.0."));
    REQUIRE(d.experts().size() == 8);
    CHECK(d.experts()[0].key.draft);
    const aff::Checkpoint ck(model("tiny-a-fp8"));
    CHECK(check_against_checkpoint(d, ck, Codebook::builtin(), 0.06) == 8 * 3);

    // The same codebook given as a standalone file makes the same bytes.
    Codebook::builtin().write_file(dir / "cb.aqc");
    o.out_path = dir / "d2.aff";
    o.codebook_path = dir / "cb.aqc";
    o.imatrix_path.clear();
    run(o);
    const aff::Container d2 = aff::Container::open(dir / "d2.aff");
    CHECK(d2.codebook_id() == main.codebook_id());
    CHECK(d2.metadata().at("quantiser").at("codebook") == "codebook file cb.aqc");
    for (const aff::TensorInfo& t : d2.tensors()) {
        const auto a = d.bytes(d.tensor(t.name)), b = d2.bytes(t);
        CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    }
}

TEST_CASE("quantize: a draft of a checkpoint without mtp stages, or against a draft, is an error", "[quant]") {
    TempDir dir;
    QuantizeOptions o = options(model("tiny-b"), dir / "d.aff");
    o.draft = true;
    o.codebook_path = dir / "cb.aqc";
    Codebook::builtin().write_file(o.codebook_path);
    CHECK_THROWS_WITH(run(o), Catch::Contains("no mtp.* tensors"));
    CHECK_FALSE(fs::exists(dir / "d.aff"));

    run(options(model("tiny-a-fp8"), dir / "m.aff"));
    o = options(model("tiny-a-fp8"), dir / "d.aff");
    o.draft = true;
    o.codebook_path = dir / "m.aff";
    run(o);
    o.out_path = dir / "d2.aff";
    o.codebook_path = dir / "d.aff";  // a draft has only the id, not the codebook
    CHECK_THROWS_WITH(run(o), Catch::Contains("d.aff: has no codebook section (CBOK)"));
}

TEST_CASE("quantize: the output is the same bytes at any thread count", "[quant]") {
    TempDir dir;
    QuantizeOptions o = options(model("tiny-b"), dir / "t1.aff");
    run(o, 1);
    o.out_path = dir / "t4.aff";
    run(o, 4);
    const auto a = read_all(dir / "t1.aff"), b = read_all(dir / "t4.aff");
    REQUIRE(a.size() > 4096);
    CHECK(a == b);
}

TEST_CASE("quantize: --layers keeps the first layers and a consistent config", "[quant]") {
    TempDir dir;
    QuantizeOptions o = options(model("tiny-a-fp8"), dir / "m.aff");
    o.layers = 2;
    run(o);
    const aff::Container c = aff::Container::open(dir / "m.aff");
    const nlohmann::json& cfg = c.metadata().at("config");
    CHECK(cfg.at("num_hidden_layers") == 2);
    CHECK(cfg.at("compress_ratios") == nlohmann::json::array({0, 4, 0}));  // the MTP entry stays
    CHECK(cfg.at("num_hash_layers") == 2);
    const aff::ModelConfig mc = aff::parse_model_config(cfg, "META config");
    CHECK(mc.num_layers == 2);
    CHECK(mc.num_mtp_layers == 1);
    CHECK(c.metadata().at("quantiser").at("layers") == 2);
    CHECK(c.metadata().at("quantiser").at("source_layers") == 6);
    CHECK(c.experts().size() == 2 * 8);
    for (const aff::TensorInfo& t : c.tensors()) {
        INFO(t.name);
        CHECK_FALSE(t.name.starts_with("layers.2."));
        CHECK_FALSE(t.name.starts_with("layers.5."));
    }
    CHECK(c.find("head.weight"));
    CHECK(c.find("layers.1.attn.indexer.wq_b.weight"));

    // The transformers form: layer_types and mlp_layer_types lose the dropped layers.
    const nlohmann::json t = truncate_config(aff::Checkpoint(model("tiny-a")).config_json(), 3, "config.json");
    CHECK(t.at("layer_types").size() == 3);
    CHECK(t.at("mlp_layer_types") == nlohmann::json::array({"hash_moe", "hash_moe", "moe"}));
    CHECK(aff::parse_model_config(t, "config.json").num_layers == 3);

    // A draft made with the same --layers records the same config, so the two pair.
    QuantizeOptions d = o;
    d.out_path = dir / "d.aff";
    d.draft = true;
    d.codebook_path = dir / "m.aff";
    run(d);
    const aff::Container draft = aff::Container::open(dir / "d.aff");
    CHECK(draft.metadata().at("config") == cfg);
    CHECK(draft.experts().size() == 8);

    o.layers = 7;
    o.out_path = dir / "x.aff";
    CHECK_THROWS_WITH(run(o), "--layers 7 is out of range: the checkpoint has 6 layers");
}

TEST_CASE("quantize: impossible options are usage errors", "[quant]") {
    TempDir dir;
    QuantizeOptions o = options(model("tiny-b"), dir / "m.aff");
    o.codebook_path = dir / "cb";
    CHECK_THROWS_WITH(run(o), "--codebook is only for --dspark (the main container uses the built-in codebook)");
    o.codebook_path.clear();
    o.draft = true;
    CHECK_THROWS_WITH(run(o), "--dspark needs --codebook FILE (the main container or a codebook file)");
    o.draft = false;
    o.out_path = dir.path.string();
    try {
        run(o);
        FAIL("no error");
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::usage);
        CHECK(e.message() == "--out " + dir.path.string() + " is a directory");
    }
}

namespace {
// A GGUF imatrix for tiny-b (3 layers, 6 experts, hidden 64, intermediate 32).
aff::test::Bytes tiny_b_imatrix(std::uint64_t up_cols = 64) {
    std::vector<aff::test::GgufTensor> t;
    for (int layer = 0; layer < 3; ++layer) {
        const std::vector<float> counts = {10, 0, 5, 7, 1, float(layer)};
        for (const char* kind : {"gate", "up", "down"}) {
            const std::uint64_t cols = std::string(kind) == "down" ? 32 : (std::string(kind) == "up" ? up_cols : 64);
            std::vector<float> sum2;
            for (std::size_t e = 0; e < 6; ++e)
                for (std::uint64_t j = 0; j < cols; ++j) sum2.push_back(counts[e] * float(1 + (j % 7) * (j % 7)));
            const std::string name = "blk." + std::to_string(layer) + ".ffn_" + kind + "_exps.weight";
            t.push_back({name + ".in_sum2", {cols, 6}, sum2});
            t.push_back({name + ".counts", {1, 6}, counts});
        }
    }
    // A V4 matrix that is no routed expert (skipped silently), the MTP block's experts
    // (blk.3 after tiny-b's 3 trunk layers: the draft's, not the main container's), and a
    // name of another architecture (reported).
    t.push_back({"blk.0.attn_q_a.weight.in_sum2", {64, 1}, std::vector<float>(64, 1.0f)});
    t.push_back({"blk.0.attn_q_a.weight.counts", {1, 1}, {3}});
    t.push_back({"blk.3.ffn_down_exps.weight.in_sum2", {32, 6}, std::vector<float>(32 * 6, 1.0f)});
    t.push_back({"blk.3.ffn_down_exps.weight.counts", {1, 6}, std::vector<float>(6, 1.0f)});
    t.push_back({"blk.0.ssm_in.weight.in_sum2", {64, 1}, std::vector<float>(64, 1.0f)});
    t.push_back({"blk.0.ssm_in.weight.counts", {1, 1}, {3}});
    return aff::test::gguf(t);
}

// Quantises o's checkpoint again without the imatrix and compares tensors of the two
// containers byte for byte: the weighting must change each of `changed` and none of `same`.
void check_weighting(QuantizeOptions o, const aff::Container& weighted, const std::string& plain_path,
                     const std::vector<std::string>& changed, const std::vector<std::string>& same) {
    o.imatrix_path.clear();
    o.out_path = plain_path;
    run(o);
    const aff::Container plain = aff::Container::open(plain_path);
    auto equal = [&](const std::string& name) {
        const auto a = weighted.bytes(weighted.tensor(name)), b = plain.bytes(plain.tensor(name));
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    };
    for (const std::string& name : changed) {
        INFO(name);
        CHECK_FALSE(equal(name));
    }
    for (const std::string& name : same) {
        INFO(name);
        CHECK(equal(name));
    }
}
}  // namespace

TEST_CASE("quantize: an imatrix weighs the experts and becomes the expert profile", "[quant]") {
    TempDir dir;
    write_all(dir / "im.gguf", tiny_b_imatrix());
    QuantizeOptions o = options(model("tiny-b"), dir / "m.aff");
    o.imatrix_path = dir / "im.gguf";
    NoteLog log;
    run(o, 2, log);
    REQUIRE(log.notes.size() == 1);
    CHECK(log.notes[0] ==
          "imatrix: 1 tensors name no DeepSeek-V4 matrix and are not used (first: blk.0.ssm_in.weight)");
    const aff::Container c = aff::Container::open(dir / "m.aff");
    CHECK(c.metadata().at("quantiser").at("imatrix") == true);
    const auto im = read_all(dir / "im.gguf");
    CHECK(c.metadata().at("provenance").at("imatrix") ==
          nlohmann::json({{"file", "im.gguf"}, {"sha256", aff::to_hex(aff::sha256(im.data(), im.size()))}}));
    REQUIRE(c.expert_profile());
    const ExpertProfile p = ExpertProfile::parse(*c.expert_profile(), "PROF");
    CHECK(p.layers == 3);
    CHECK(p.experts == 6);
    CHECK(p.count(0, 0) == 10);
    CHECK(p.count(2, 5) == 2);
    const aff::Checkpoint ck(model("tiny-b"));
    CHECK(check_against_checkpoint(c, ck, Codebook::builtin(), 0.08) == 3 * 6 * 3);

    // The weighting changes the experts the calibration saw (expert 0), not those it
    // never routed to (expert 1, count 0), and no dense tensor.
    check_weighting(o, c, dir / "plain.aff", {"layers.1.ffn.experts.0.w1.weight", "layers.1.ffn.experts.0.w2.weight"},
                    {"layers.1.ffn.experts.1.w1.weight", "layers.1.attn.wq_a.weight"});
}

TEST_CASE("quantize: an imatrix whose shapes disagree with the checkpoint names the tensor", "[quant]") {
    TempDir dir;
    write_all(dir / "im.gguf", tiny_b_imatrix(48));
    QuantizeOptions o = options(model("tiny-b"), dir / "m.aff");
    o.imatrix_path = dir / "im.gguf";
    CHECK_THROWS_WITH(run(o), (dir / "im.gguf") +
                                  ": tensor blk.0.ffn_up_exps.weight: is 48 columns x 6 matrices, the checkpoint's "
                                  "weight 64 x 6");
    CHECK_FALSE(fs::exists(dir / "m.aff"));
}

TEST_CASE("quantize: a legacy .dat imatrix weighs the experts but makes no profile", "[quant]") {
    TempDir dir;
    std::vector<float> up(64 * 6);
    for (std::size_t i = 0; i < up.size(); ++i) up[i] = i % 8 == 0 ? 100.0f : 0.01f;  // a few hot columns
    write_all(dir / "im.dat", aff::test::dat({{"blk.0.ffn_up_exps.weight", up}}, 10, true));
    QuantizeOptions o = options(model("tiny-b"), dir / "m.aff");
    o.imatrix_path = dir / "im.dat";
    NoteLog log;
    run(o, 2, log);
    CHECK(log.notes == std::vector<std::string>{
                           "imatrix: no data for 2 of 3 layers (first: layer 1); they are quantised unweighted",
                           "imatrix: a legacy .dat file has no per-expert counts; the container gets no expert profile"});
    const aff::Container c = aff::Container::open(dir / "m.aff");
    CHECK_FALSE(c.expert_profile());
    CHECK(c.metadata().at("quantiser").at("imatrix") == true);
    // Layer 0's w1 and w3 are weighted (up serves gate too), its w2 and layer 1 are not.
    check_weighting(o, c, dir / "plain.aff", {"layers.0.ffn.experts.2.w1.weight", "layers.0.ffn.experts.2.w3.weight"},
                    {"layers.0.ffn.experts.2.w2.weight", "layers.1.ffn.experts.2.w1.weight"});
}

TEST_CASE("quantize: fused transformers expert tensors (tiny-c) are split per expert", "[quant]") {
    TempDir dir;
    const QuantizeReport r = run(options(model("tiny-c"), dir / "m.aff"));
    const aff::Container c = aff::Container::open(dir / "m.aff");
    const aff::Checkpoint ck(model("tiny-c"));
    const aff::ModelConfig mc = aff::parse_model_config(ck.config_json(), "config.json");
    const std::size_t experts = std::size_t(mc.num_layers) * std::size_t(mc.n_routed_experts);
    CHECK(r.experts == experts);
    CHECK(c.experts().size() == experts);
    CHECK(check_against_checkpoint(c, ck, Codebook::builtin(), 0.06) == experts * 3);
    CHECK(c.tensor("layers.0.ffn.experts.5.w3.weight").shape ==
          std::vector<std::uint64_t>{std::uint64_t(mc.moe_intermediate_size), std::uint64_t(mc.hidden_size)});
}

TEST_CASE("quantize: FP8 block-scaled experts (the Base checkpoints) are dequantised exactly", "[quant]") {
    // One layer of tiny-a-fp8's geometry whose 8 experts are F8_E4M3 with F32 scales.
    TempDir dir;
    fs::create_directories(dir.path / "ck");
    const nlohmann::json cfg = truncate_config(aff::Checkpoint(model("tiny-a-fp8")).config_json(), 1, "config.json");
    std::ofstream(dir / "ck/config.json") << cfg.dump(1);
    nlohmann::json header = nlohmann::json::object();
    std::vector<std::uint8_t> data;
    auto add = [&](const std::string& name, const char* dtype, std::vector<std::uint64_t> shape,
                   const std::vector<std::uint8_t>& bytes) {
        header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
        data.insert(data.end(), bytes.begin(), bytes.end());
    };
    std::uint32_t x = 1;
    for (int e = 0; e < 8; ++e)
        for (int w = 1; w <= 3; ++w) {
            const std::uint64_t rows = w == 2 ? 128 : 32, cols = w == 2 ? 32 : 128;
            std::vector<std::uint8_t> codes(rows * cols);
            for (auto& b : codes) {
                x = x * 1664525u + 1013904223u;
                b = static_cast<std::uint8_t>((x >> 24) & 0xF7) | 0x20;  // finite E4M3, never NaN
            }
            const float scale = 0.125f * float(e + 1);
            std::vector<std::uint8_t> s(4);
            std::memcpy(s.data(), &scale, 4);
            const std::string p = "layers.0.ffn.experts." + std::to_string(e) + ".w" + std::to_string(w);
            add(p + ".weight", "F8_E4M3", {rows, cols}, codes);
            add(p + ".scale", "F32", {1, 1}, s);
        }
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');
    std::vector<std::uint8_t> file(8);
    for (int i = 0; i < 8; ++i) file[std::size_t(i)] = static_cast<std::uint8_t>(std::uint64_t(text.size()) >> (8 * i));
    file.insert(file.end(), text.begin(), text.end());
    file.insert(file.end(), data.begin(), data.end());
    write_all(dir / "ck/model.safetensors", file);

    const QuantizeReport r = run(options(dir / "ck", dir / "m.aff"));
    CHECK(r.experts == 8);
    const aff::Container c = aff::Container::open(dir / "m.aff");
    const aff::Checkpoint ck(dir / "ck");
    CHECK(check_against_checkpoint(c, ck, Codebook::builtin(), 0.06) == 8 * 3);
    CHECK(c.tensors().size() == 8 * 3);  // the scales are absorbed, not stored
}

TEST_CASE("quantize: the pipeline around a background search writes the CPU path's bytes", "[quant]") {
    TempDir dir;
    write_all(dir / "im.gguf", tiny_b_imatrix());
    for (bool weighted : {false, true}) {
        INFO((weighted ? "with" : "without") << " an imatrix");
        QuantizeOptions o = options(model("tiny-b"), dir / "cpu.aff");
        if (weighted) o.imatrix_path = dir / "im.gguf";  // the rotation choice searches meanwhile
        o.layers = weighted ? 3 : 1;                      // (seconds: one layer shows the rest)
        const std::size_t experts = o.layers * 6;
        const QuantizeReport a = run(o, 3);
        aff::test::BackgroundSearch search;
        o.matrix.search = &search;
        o.out_path = dir / "pipelined.aff";
        const QuantizeReport b = run(o, 3);
        CHECK(search.started == static_cast<int>(experts * 3));  // every matrix's searches overlapped
        CHECK(read_all(dir / "cpu.aff") == read_all(dir / "pipelined.aff"));
        CHECK(a.nmse == Approx(b.nmse).epsilon(1e-12));
        CHECK(a.worst_nmse == Approx(b.worst_nmse).epsilon(1e-12));
        CHECK(a.worst_matrix == b.worst_matrix);
        CHECK(a.rotated_matrices == b.rotated_matrices);
        CHECK(a.experts == experts);
        CHECK(b.experts == experts);
        CHECK(a.dense_tensors == b.dense_tensors);
    }
}
