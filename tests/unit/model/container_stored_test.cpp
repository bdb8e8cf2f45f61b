// What a container hands a backend that keeps weights as stored (the GPU model): the
// codebook-stored bytes of routed experts (ContainerExpertSource as CodebookExperts) and
// the FP8 bytes of dense weights (TensorReader::fp8_stored), the same from a container as
// from the checkpoint it was made from. The bytes must be the memory map's own, and
// multiplying them must give what the CPU path multiplies.
#include "container_fixture.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/model/container_experts.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/quant/matrix.hpp"

#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <random>
#include <utility>

namespace {

const std::string models = std::string(AFF_TEST_DATA) + "/models";

struct Opened {
    std::shared_ptr<const aff::Container> container;
    std::unique_ptr<aff::ContainerTensorReader> reader;
    aff::ModelConfig config;
    std::unique_ptr<aff::ContainerExpertSource> experts;
};

Opened open(const std::string& path) {
    Opened o;
    o.container = std::make_shared<const aff::Container>(aff::Container::open(path));
    o.reader = std::make_unique<aff::ContainerTensorReader>(o.container);
    o.config = aff::parse_model_config(*o.container->config(), path);
    o.experts = std::make_unique<aff::ContainerExpertSource>(o.container, o.reader->codebook(), o.config, 0);
    return o;
}

const char* matrix_name(aff::ExpertMatrix w) {
    return w == aff::ExpertMatrix::w1 ? "w1" : w == aff::ExpertMatrix::w2 ? "w2" : "w3";
}

}  // namespace

TEST_CASE("a quantised container's expert source offers the stored bytes of every expert matrix", "[model]") {
    for (const auto& [name, rotation] : {std::pair{"tiny-a", aff::quant::Rotation::automatic},
                                         std::pair{"tiny-b", aff::quant::Rotation::automatic},
                                         std::pair{"tiny-b", aff::quant::Rotation::off}}) {
        INFO(name << (rotation == aff::quant::Rotation::off ? ", TQ2875" : ", TQ2875R"));
        aff::test::TempDir tmp;
        const std::string path = tmp / "q.aff";
        aff::test::FixtureContainerOptions opt;
        opt.experts = aff::test::ExpertStorage::trellis;
        opt.rotation = rotation;
        aff::test::write_fixture_container(models + "/" + name, path, opt);
        const Opened o = open(path);
        const aff::CodebookExperts& cb = *o.experts;
        CHECK(cb.codebook().fp16_values().size() == aff::quant::Codebook::builtin().fp16_values().size());
        CHECK(std::memcmp(cb.codebook().fp16_values().data(), aff::quant::Codebook::builtin().fp16_values().data(),
                          cb.codebook().fp16_values().size() * 2) == 0);
        const int D = o.config.hidden_size, I = o.config.moe_intermediate_size;
        std::mt19937 rng(7);
        std::normal_distribution<float> nd;
        int rotated = 0, checked = 0;
        for (int l = 0; l < o.config.num_layers; ++l)
            for (int e = 0; e < o.config.n_routed_experts; ++e)
                for (aff::ExpertMatrix w : {aff::ExpertMatrix::w1, aff::ExpertMatrix::w2, aff::ExpertMatrix::w3}) {
                    const std::string tensor = "layers." + std::to_string(l) + ".ffn.experts." + std::to_string(e) +
                                               "." + matrix_name(w) + ".weight";
                    const aff::TensorInfo* t = o.container->find(tensor);
                    REQUIRE(t != nullptr);
                    const aff::CodebookExperts::Stored st = cb.codebook_matrix(l, e, w);
                    // The memory map's own bytes, flagged as the storage type says.
                    CHECK(st.bytes == o.container->bytes(*t).data());
                    CHECK(st.rotated == (t->type == aff::StorageType::TQ2875R));
                    rotated += st.rotated ? 1 : 0;
                    // Multiplying them is what the CPU path does.
                    const int rows = w == aff::ExpertMatrix::w2 ? D : I, cols = w == aff::ExpertMatrix::w2 ? I : D;
                    std::vector<float> x(cols), want(rows), got(rows);
                    for (float& v : x) v = nd(rng);
                    o.experts->matvec(l, e, w, x.data(), want.data());
                    aff::quant::matvec({st.bytes, aff::quant::matrix_bytes(rows, cols)}, rows, cols, st.rotated,
                                       cb.codebook(), x.data(), got.data());
                    CHECK(got == want);
                    ++checked;
                }
        CHECK(checked == o.config.num_layers * o.config.n_routed_experts * 3);
        // Automatic rotation without an imatrix rotates whenever the width is a power of two:
        // every fixture's D and I are, so every matrix is TQ2875R; off gives TQ2875 throughout.
        CHECK(rotated == (rotation == aff::quant::Rotation::off ? 0 : checked));
    }
}

TEST_CASE("a container whose experts are not codebook-stored offers no bytes and no codebook", "[model]") {
    aff::test::TempDir tmp;
    const std::string path = tmp / "v.aff";
    aff::test::write_fixture_container(models + "/tiny-a-fp8", path);  // verbatim: FP4 experts
    const Opened o = open(path);
    CHECK(o.experts->codebook_matrix(0, 0, aff::ExpertMatrix::w1).bytes == nullptr);
    CHECK(o.experts->codebook_matrix(5, 7, aff::ExpertMatrix::w2).bytes == nullptr);
    CHECK_THROWS_AS(o.experts->codebook(), aff::Error);
}

TEST_CASE("FP8 dense weights: a container gives the bytes and scales its checkpoint gives", "[model]") {
    const std::string dir = models + "/tiny-a-fp8";
    aff::test::TempDir tmp;
    const std::string path = tmp / "v.aff";
    aff::test::write_fixture_container(dir, path);
    const aff::Checkpoint ck(dir);
    const Opened o = open(path);
    int fp8 = 0;
    for (const std::string& name : ck.names()) {
        INFO(name);
        const auto from_ck = ck.fp8_stored(name);
        const auto from_container = o.reader->fp8_stored(name);
        const aff::TensorView& v = ck.tensor(name);
        const bool is_fp8_weight = v.dtype == aff::DType::f8_e4m3;
        CHECK(from_ck.has_value() == is_fp8_weight);
        CHECK(from_container.has_value() == is_fp8_weight);
        if (!from_ck || !from_container) continue;
        ++fp8;
        CHECK(from_ck->codes == v.data);
        CHECK(from_ck->code_bytes == v.shape[0] * v.shape[1]);
        CHECK(from_ck->scale_bytes == ((v.shape[0] + 127) / 128) * ((v.shape[1] + 127) / 128));
        REQUIRE(from_container->code_bytes == from_ck->code_bytes);
        REQUIRE(from_container->scale_bytes == from_ck->scale_bytes);
        CHECK(std::memcmp(from_container->codes, from_ck->codes, from_ck->code_bytes) == 0);
        CHECK(std::memcmp(from_container->scales, from_ck->scales, from_ck->scale_bytes) == 0);
        // Inside the container's memory map.
        const auto file = o.container->file_bytes();
        CHECK(from_container->codes >= file.data());
        CHECK(from_container->codes + from_container->code_bytes <= file.data() + file.size());
    }
    CHECK(fp8 == 61);  // the fixture's FP8 dense weights (25 + 36 in its two shards)
    CHECK_FALSE(ck.fp8_stored("no.such.weight").has_value());
    CHECK_FALSE(o.reader->fp8_stored("no.such.weight").has_value());
    CHECK_FALSE(o.reader->fp8_stored("layers.0.attn_norm.weight").has_value());  // BF16
}
