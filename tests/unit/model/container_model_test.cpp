// Model::load on .aff containers (libaff/model/load.cpp, container_tensors.cpp,
// container_experts.cpp): a container holding a fixture's tensors verbatim runs to the
// checkpoint's logits bit for bit, on every fixture (BF16, fused transformers experts,
// FP8 dense + FP4 experts); the on-the-fly decoder of TQ2875/TQ2875R experts agrees with
// the reference dequantiser; and every bad container is one error naming the container
// and the tensor or field at fault. (The quality of aff-quantize's containers is
// quantised_quality_test.cpp.)
#include "container_fixture.hpp"
#include "../container/bad_fixtures.hpp"

#include "libaff/container/layout.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/completeness.hpp"
#include "libaff/model/container_experts.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include "../file_bytes.hpp"
#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

using aff::test::TempDir;

// A fixed token sequence over the whole vocabulary (every fixture has V = 256).
std::vector<std::int32_t> probe_tokens(int V, int n = 40) {
    std::vector<std::int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<std::int32_t>((i * 37 + 11) % V));
    return t;
}

std::vector<float> all_logits(const std::string& path, const std::vector<std::int32_t>& tokens) {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(path, pool);
    aff::DecodeState st = model->new_state();
    return model->forward(st, tokens, true);
}

std::string load_error(const std::string& path) {
    aff::ThreadPool pool(1);
    try {
        aff::Model::load(path, pool);
    } catch (const aff::Error& e) {
        return e.what();
    }
    return "(no error)";
}

using aff::test::read_all;
using aff::test::write_all;

}  // namespace

TEST_CASE("a container holding a fixture's tensors verbatim gives the checkpoint's logits bit for bit", "[model]") {
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        INFO(name);
        TempDir tmp;
        const std::string dir = models + "/" + name, aff_path = tmp / "model.aff";
        aff::test::write_fixture_container(dir, aff_path);
        const auto tokens = probe_tokens(256);
        const auto want = all_logits(dir, tokens), got = all_logits(aff_path, tokens);
        REQUIRE(got.size() == want.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
        CHECK(differ == 0);
    }
}

TEST_CASE("a container runs its MTP layer from the container's draft-stage experts", "[model]") {
    TempDir tmp;
    const std::string dir = models + "/tiny-a-fp8", aff_path = tmp / "model.aff";
    aff::test::write_fixture_container(dir, aff_path);
    aff::ThreadPool pool(2);
    auto a = aff::Model::load(dir, pool), b = aff::Model::load(aff_path, pool);
    REQUIRE(a->has_mtp());
    REQUIRE(b->has_mtp());
    const auto tokens = probe_tokens(256, 12);
    aff::DecodeState sa = a->new_state(), sb = b->new_state();
    std::vector<float> ha, hb;
    a->forward(sa, tokens, false, &ha);
    b->forward(sb, tokens, false, &hb);
    REQUIRE(ha == hb);
    const std::vector<std::int32_t> next(tokens.begin() + 1, tokens.end());
    const auto la = a->mtp_forward(sa, std::span(ha).first(ha.size() / tokens.size() * next.size()), next);
    const auto lb = b->mtp_forward(sb, std::span(hb).first(hb.size() / tokens.size() * next.size()), next);
    CHECK(la == lb);
}

TEST_CASE("the on-the-fly expert decoder agrees with the reference dequantiser", "[model]") {
    // ContainerExpertSource's matvec (quant::matvec on the mapped bytes, rotated input for
    // TQ2875R) against W x with W from quant::dequantize_row, for every matrix of a layer.
    TempDir tmp;
    const std::string dir = models + "/tiny-b", path = tmp / "model.aff";
    aff::test::FixtureContainerOptions opt;
    opt.experts = aff::test::ExpertStorage::trellis;
    aff::test::write_fixture_container(dir, path, opt);
    auto container = std::make_shared<const aff::Container>(aff::Container::open(path));
    const aff::ContainerTensorReader reader(container);
    const aff::ModelConfig config = aff::parse_model_config(*container->config(), path);
    const aff::ContainerExpertSource source(container, reader.codebook(), config, 0);
    const int D = config.hidden_size, I = config.moe_intermediate_size;
    for (int e = 0; e < config.n_routed_experts; ++e)
        for (auto [which, rows, cols, suffix] : {std::tuple{aff::ExpertMatrix::w1, I, D, "w1"},
                                                 std::tuple{aff::ExpertMatrix::w2, D, I, "w2"},
                                                 std::tuple{aff::ExpertMatrix::w3, I, D, "w3"}}) {
            const std::string name = "layers.1.ffn.experts." + std::to_string(e) + "." + suffix + ".weight";
            INFO(name);
            const auto w = reader.read_f32(name, {std::uint64_t(rows), std::uint64_t(cols)});
            std::vector<float> x(cols), y(rows);
            for (int j = 0; j < cols; ++j) x[j] = std::sin(0.7f * j + e);
            source.matvec(1, e, which, x.data(), y.data());
            double err = 0, norm = 0;
            for (int r = 0; r < rows; ++r) {
                double want = 0;
                for (int j = 0; j < cols; ++j) want += double(w[std::size_t(r) * cols + j]) * x[j];
                err = std::max(err, std::fabs(want - y[r]));
                norm = std::max(norm, std::fabs(want));
            }
            CHECK(err <= 1e-5 * norm);
            CHECK(norm > 0);
        }
}

TEST_CASE("a container that lacks a tensor the config needs is one error naming it", "[model]") {
    TempDir tmp;
    const std::string dir = models + "/tiny-a", path = tmp / "model.aff";
    aff::test::FixtureContainerOptions opt;
    SECTION("dense") {
        opt.keep = [](const std::string& n) { return n != "layers.1.attn.wq_a.weight"; };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": missing tensor layers.1.attn.wq_a.weight");
    }
    SECTION("routed expert") {
        opt.keep = [](const std::string& n) { return n != "layers.2.ffn.experts.5.w3.weight"; };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": missing tensor layers.2.ffn.experts.5.w3.weight");
    }
    SECTION("the FP8 scale of a dense weight") {
        opt.keep = [](const std::string& n) { return n != "layers.0.attn.wq_a.scale"; };
        aff::test::write_fixture_container(models + "/tiny-a-fp8", path, opt);
        CHECK(load_error(path) == path + ": tensor layers.0.attn.wq_a.weight: F8_E4M3 weight without its scale "
                                         "tensor layers.0.attn.wq_a.scale");
    }
}

TEST_CASE("a container tensor of the wrong shape is one error naming it", "[model]") {
    TempDir tmp;
    const std::string dir = models + "/tiny-a", path = tmp / "model.aff";
    aff::test::FixtureContainerOptions opt;
    SECTION("vector") {
        opt.keep = [](const std::string& n) { return n != "norm.weight"; };
        opt.add_dense = [](aff::ContainerWriter& w) {
            std::vector<float> v(64, 1.0f);
            w.add_tensor("norm.weight", aff::StorageType::F32, {64}, {reinterpret_cast<const std::uint8_t*>(v.data()), 256});
        };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": tensor norm.weight: shape [64], expected [128]");
    }
    SECTION("matrix") {
        opt.keep = [](const std::string& n) { return n != "layers.0.attn.wkv.weight"; };
        opt.add_dense = [](aff::ContainerWriter& w) {
            std::vector<std::uint8_t> v(128 * 64 * 2, 0);
            w.add_tensor("layers.0.attn.wkv.weight", aff::StorageType::BF16, {128, 64}, v);
        };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": tensor layers.0.attn.wkv.weight: shape [128, 64], expected [64, 128]");
    }
}

TEST_CASE("codebook problems in a quantised container are one error each", "[model]") {
    TempDir tmp;
    const std::string dir = models + "/tiny-b", path = tmp / "model.aff";
    aff::test::FixtureContainerOptions opt;
    opt.experts = aff::test::ExpertStorage::trellis;
    SECTION("quantised tensors without a CBOK section") {
        opt.codebook_section = false;
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": tensor layers.0.ffn.experts.0.w1.weight: stored as TQ2875R but the "
                                         "container has no codebook (CBOK)");
    }
    SECTION("codebook_id that does not match CBOK") {
        // The writer refuses to write this, so the id is changed in the written bytes.
        aff::test::write_fixture_container(dir, path, opt);
        auto bytes = read_all(path);
        {
            const aff::Container c = aff::Container::open(path);
            const aff::SectionInfo* meta = c.find_section(aff::kSectionMeta);
            std::string text(bytes.begin() + meta->offset, bytes.begin() + meta->offset + meta->size);
            const std::size_t at = text.find(*c.codebook_id());
            REQUIRE(at != std::string::npos);
            text.replace(at, 16, "0123456789abcdef");
            std::copy(text.begin(), text.end(), bytes.begin() + meta->offset);
        }
        aff::test::reseal(bytes);
        write_all(path, bytes);
        const std::string e = load_error(path);
        CHECK_THAT(e, Catch::StartsWith(path + ": metadata: codebook_id 0123456789abcdef does not match the "
                                               "codebook section ("));
    }
    SECTION("a codebook of a version this build does not read") {
        opt.edit_codebook = [](std::vector<std::uint8_t>& b) { b[8] = 2; };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": section CBOK: codebook version 2 (this build reads 1)");
    }
    SECTION("a codebook-quantised storage type this build does not know") {
        aff::test::write_fixture_container(dir, path, opt);
        auto bytes = read_all(path);
        {
            const aff::Container c = aff::Container::open(path);
            const std::uint64_t rec = aff::test::tensor_record(c, "layers.1.ffn.experts.2.w2.weight");
            aff::container_layout::store_u16(&bytes[rec + 62], 0x0102);
        }
        aff::test::reseal(bytes);
        write_all(path, bytes);
        CHECK(load_error(path) == path + ": tensor layers.1.ffn.experts.2.w2.weight: storage type 258 is not known "
                                         "to this reader");
    }
}

TEST_CASE("a draft container or one without a config is refused with one clear line", "[model]") {
    TempDir tmp;
    const std::string dir = models + "/tiny-c", path = tmp / "model.aff";
    aff::test::FixtureContainerOptions opt;
    SECTION("draft") {
        opt.edit_metadata = [](nlohmann::json& m) { m["role"] = "draft"; };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": a draft container (metadata role \"draft\") holds only the mtp.* stages "
                                         "for speculative decoding; give the main container (and this file with "
                                         "--draft-model)");
    }
    SECTION("no config") {
        opt.edit_metadata = [](nlohmann::json& m) { m.erase("config"); };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(load_error(path) == path + ": metadata has no config (the model's config.json)");
    }
}

TEST_CASE("completeness: what aff-run would refuse, aff-verify refuses too, without decoding a weight", "[model]") {
    TempDir tmp;
    const std::string dir = models + "/tiny-b", path = tmp / "model.aff";
    aff::test::FixtureContainerOptions opt;
    opt.experts = aff::test::ExpertStorage::trellis;
    SECTION("a complete container") {
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(aff::check_container_complete(path) == aff::Completeness::complete);
    }
    SECTION("TQ2875R experts without the CBOK section (its digests all match)") {
        opt.codebook_section = false;
        aff::test::write_fixture_container(dir, path, opt);
        CHECK_THROWS_WITH(aff::check_container_complete(path),
                          path + ": tensor layers.0.ffn.experts.0.w1.weight: stored as TQ2875R but the container has no "
                                 "codebook (CBOK)");
    }
    SECTION("a dense tensor left out") {
        opt.keep = [](const std::string& name) { return name != "layers.2.attn.wo_b.weight"; };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK_THROWS_WITH(aff::check_container_complete(path), Catch::Contains("missing tensor layers.2.attn.wo_b.weight"));
    }
    SECTION("a routed expert left out") {
        opt.keep = [](const std::string& name) { return name != "layers.1.ffn.experts.5.w2.weight"; };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK_THROWS_WITH(aff::check_container_complete(path), Catch::Contains("layers.1.ffn.experts.5.w2.weight"));
    }
    SECTION("no config in the metadata: nothing to check against") {
        opt.edit_metadata = [](nlohmann::json& m) { m.erase("config"); };
        aff::test::write_fixture_container(dir, path, opt);
        CHECK(aff::check_container_complete(path) == aff::Completeness::no_config);
    }
}

TEST_CASE("completeness of a checkpoint: the checks of loading, no weight decoded", "[model]") {
    const aff::Checkpoint ck(models + "/tiny-a");
    CHECK_NOTHROW(aff::check_checkpoint_complete(ck, ck.config_json()));
    nlohmann::json wider = ck.config_json();
    wider["moe_intermediate_size"] = 128;
    CHECK_THROWS_WITH(aff::check_checkpoint_complete(ck, wider), Catch::Contains("expected [128, 128]"));
    nlohmann::json more = ck.config_json();
    more["n_routed_experts"] = 9;
    CHECK_THROWS_WITH(aff::check_checkpoint_complete(ck, more), Catch::Contains("expected [9, 128]"));
}
