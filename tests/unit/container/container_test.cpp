// Tests for the container reader and writer (libaff/container/container.cpp,
// writer.cpp, storage_type.cpp, tensor_names.cpp, digests.cpp): what is written is
// read back field for field, and what the spec forbids is refused with a named error.
#include "tiny_fixture.hpp"

#include "libaff/container/container.hpp"
#include "libaff/container/digests.hpp"
#include "libaff/container/layout.hpp"
#include "libaff/container/writer.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"

#include "../file_bytes.hpp"
#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace fs = std::filesystem;
using aff::StorageType;

namespace {

using aff::test::TempDir;

using aff::test::read_all;

}  // namespace

TEST_CASE("storage types size shapes by their block rule", "[container]") {
    const std::vector<std::uint64_t> s35{3, 5}, s47{4, 7}, scalar{}, huge{1ull << 40, 1ull << 40};
    CHECK(aff::storage_bytes(StorageType::BF16, s35) == 30);
    CHECK(aff::storage_bytes(StorageType::F32, scalar) == 4);
    CHECK(aff::storage_bytes(StorageType::FP4_E2M1, s47) == 16);  // 7 values take 4 bytes a row
    CHECK(aff::storage_bytes(StorageType::I64, s35) == 120);
    CHECK_FALSE(aff::storage_bytes(StorageType::F64, huge).has_value());
    CHECK_FALSE(aff::storage_type_info(0x0102));
    // Codebook types: 92 bytes per 256 weights (formats/quant-codebook.md §2); a row of
    // 4096 is 1472 bytes, a partial last block takes a whole one.
    const std::vector<std::uint64_t> expert{2048, 4096}, ragged{2, 300};
    CHECK(aff::storage_bytes(StorageType::TQ2875, expert) == 2048ull * 1472);
    CHECK(aff::storage_bytes(StorageType::TQ2875R, expert) == 2048ull * 1472);
    CHECK(aff::storage_bytes(StorageType::TQ2875, ragged) == 2 * 2 * 92);
    CHECK(aff::parse_storage_type("TQ2875R") == StorageType::TQ2875R);
    CHECK(aff::to_string(StorageType::F8_E8M0) == "F8_E8M0");
    CHECK(aff::parse_storage_type("FP4_E2M1") == StorageType::FP4_E2M1);
    CHECK_FALSE(aff::parse_storage_type("Q2_K").has_value());
    // IDs are written to files: they must never change.
    CHECK(static_cast<int>(StorageType::F32) == 1);
    CHECK(static_cast<int>(StorageType::TQ2875) == 0x0100);
    CHECK(static_cast<int>(StorageType::TQ2875R) == 0x0101);
    CHECK(static_cast<int>(StorageType::BF16) == 3);
    CHECK(static_cast<int>(StorageType::FP4_E2M1) == 12);
}

TEST_CASE("tensor names say which expert, layer and class they belong to", "[container]") {
    auto k = aff::expert_of_tensor("layers.3.ffn.experts.17.w1.weight");
    REQUIRE(k);
    CHECK((*k == aff::ExpertKey{false, 3, 17}));
    auto d = aff::expert_of_tensor("mtp.0.ffn.experts.255.w2.scale");
    REQUIRE(d);
    CHECK((*d == aff::ExpertKey{true, 0, 255}));
    CHECK_FALSE(aff::expert_of_tensor("layers.03.ffn.experts.1.w1.weight"));
    CHECK_FALSE(aff::expert_of_tensor("layers.3.ffn.shared_experts.w1.weight"));
    CHECK_FALSE(aff::expert_of_tensor("layers.3.ffn.experts.17"));
    CHECK(aff::expert_prefix({true, 2, 5}) == "mtp.2.ffn.experts.5");
    CHECK(aff::classify_tensor("embed.weight") == aff::TensorClass::embedding_head);
    CHECK(aff::classify_tensor("head.weight") == aff::TensorClass::embedding_head);
    CHECK(aff::classify_tensor("layers.0.ffn.experts.0.w3.weight") == aff::TensorClass::routed_expert);
    CHECK(aff::classify_tensor("mtp.0.ffn.experts.0.w3.weight") == aff::TensorClass::draft);
    CHECK(aff::classify_tensor("layers.0.attn.wkv.weight") == aff::TensorClass::dense);
    auto l = aff::layer_of_tensor("mtp.1.norm.weight");
    REQUIRE(l);
    CHECK(l->draft);
    CHECK(l->index == 1);
    CHECK_FALSE(aff::layer_of_tensor("norm.weight"));
}

TEST_CASE("a written container reads back field for field", "[container]") {
    TempDir dir;
    const std::string path = dir / "m.aff";
    aff::test::write_tiny_fixture(path);
    CHECK(dir.entries() == 1);  // no temporary left beside it
    const aff::Container c = aff::Container::open(path);
    CHECK(c.version() == 1);
    CHECK(c.tensors().size() == 27);
    CHECK(c.experts().size() == 3);
    CHECK((*c.config())["num_hidden_layers"] == 2);
    CHECK(c.metadata()["role"] == "main");
    CHECK(c.metadata()["provenance"]["created"] == "2026-01-01T00:00:00Z");
    CHECK(c.chat_template() == "<|User|>{{prompt}}<|Assistant|>");
    CHECK(c.tokenizer_json() == "{\"model\":{\"type\":\"BPE\"}}\n");
    CHECK(c.expert_profile()->size() == 16);
    const auto cb = aff::test::fixture_bytes(32, 200);
    CHECK(c.codebook_id() == aff::to_hex(aff::xxh3_64(cb.data(), cb.size())));

    const aff::TensorInfo& e = c.tensor("embed.weight");
    CHECK(e.type == StorageType::BF16);
    CHECK(e.shape == std::vector<std::uint64_t>{16, 8});
    CHECK(e.length == 256);
    CHECK(e.offset == 4096);
    CHECK(e.extent == -1);
    CHECK(e.cls == aff::TensorClass::embedding_head);
    const auto expected = aff::test::fixture_bytes(256, 1);
    CHECK(std::equal(expected.begin(), expected.end(), c.bytes(e).begin()));
    CHECK(e.digest == aff::xxh3_64(expected.data(), expected.size()));

    const aff::ExpertExtent* x = c.find_expert({false, 1, 3});
    REQUIRE(x);
    CHECK(x->offset % 4096 == 0);
    CHECK(x->tensors.size() == 6);
    const aff::TensorInfo& w2 = c.tensor("layers.1.ffn.experts.3.w2.weight");
    CHECK(w2.type == StorageType::FP4_E2M1);
    CHECK(w2.shape == std::vector<std::uint64_t>{8, 4});
    CHECK(w2.length == 16);
    CHECK(c.tensors()[x->tensors[w2.offset_in_extent == 128 ? 2 : 0]].name == "layers.1.ffn.experts.3.w2.weight");
    CHECK(w2.offset == x->offset + w2.offset_in_extent);
    CHECK(w2.offset_in_extent == 128);  // w1 (16 B) and w1.scale (4 B), each 64-aligned
    CHECK(c.find_expert({true, 0, 2}));
    CHECK(c.tensor("mtp.0.ffn.experts.2.w1.weight").cls == aff::TensorClass::draft);
    CHECK_FALSE(c.find_expert({false, 0, 0}));
    CHECK_FALSE(c.find("nope"));
    CHECK_THROWS_WITH(c.tensor("nope"), path + ": tensor nope is not in the container");

    aff::ThreadPool pool(2);
    const auto report = aff::check_tensor_digests(c, pool, aff::null_progress());
    CHECK(report.ok());
    CHECK(report.tensors == 27);
}

TEST_CASE("a tensor streamed in pieces has the digest of its whole bytes", "[container]") {
    TempDir dir;
    const auto data = aff::test::fixture_bytes(4000, 7);
    {
        aff::ContainerWriter w(dir / "s.aff");
        w.begin_tensor("embed.weight", StorageType::BF16, {40, 50});
        for (std::size_t off = 0; off < data.size(); off += 333)
            w.write(data.data() + off, std::min<std::size_t>(333, data.size() - off));
        w.end_tensor();
        w.finish();
    }
    const aff::Container c = aff::Container::open(dir / "s.aff");
    CHECK(c.tensor("embed.weight").digest == aff::xxh3_64(data.data(), data.size()));
    CHECK(c.config() == nullptr);
}

TEST_CASE("the writer refuses what the spec forbids and leaves no file behind", "[container][corrupt]") {
    TempDir dir;
    const auto b16 = aff::test::fixture_bytes(16, 1);
    {
        aff::ContainerWriter w(dir / "x.aff");
        CHECK_THROWS_WITH(w.add_tensor("layers.0.ffn.experts.1.w1.weight", StorageType::U8, {16}, b16),
                          Catch::Contains("write it between begin_expert and end_expert"));
        CHECK_THROWS_WITH(w.add_tensor("norm.weight", StorageType::BF16, {4}, b16), Catch::Contains("more bytes than"));
    }
    {
        aff::ContainerWriter w(dir / "x.aff");
        w.add_tensor("a", StorageType::U8, {16}, b16);
        CHECK_THROWS_WITH(w.add_tensor("a", StorageType::U8, {16}, b16), "tensor a written twice");
        w.begin_expert({false, 0, 1});
        CHECK_THROWS_WITH(w.add_tensor("layers.0.ffn.experts.2.w1.weight", StorageType::U8, {16}, b16),
                          "tensor layers.0.ffn.experts.2.w1.weight written inside expert layers.0.ffn.experts.1");
        // destroyed without finish(): the temporary goes away
    }
    CHECK(dir.entries() == 0);
}

TEST_CASE("readers skip unknown optional sections", "[container]") {
    TempDir dir;
    aff::ContainerWriter w(dir / "u.aff");
    w.add_tensor("norm.weight", StorageType::U8, {3}, aff::test::fixture_bytes(3, 1));
    w.set_section({'Z', 'Z', 'Z', 'Z'}, {1, 2, 3}, false);
    w.finish();
    const aff::Container c = aff::Container::open(dir / "u.aff");
    REQUIRE(c.find_section({'Z', 'Z', 'Z', 'Z'}));
    CHECK(c.section_bytes({'Z', 'Z', 'Z', 'Z'})->size() == 3);
}

TEST_CASE("the directory must agree with the model config", "[container][corrupt]") {
    TempDir dir;
    aff::ContainerWriter w(dir / "c.aff");
    w.set_metadata({{"config", {{"num_hidden_layers", 2}, {"n_routed_experts", 4}}}});
    w.add_tensor("layers.2.attn_norm.weight", StorageType::U8, {3}, aff::test::fixture_bytes(3, 1));
    CHECK_THROWS_WITH(w.finish(), Catch::Contains("validating what was written: tensor layers.2.attn_norm.weight: layer 2 out "
                                                  "of range (config num_hidden_layers = 2)"));
}

TEST_CASE("metadata fields have the types the spec gives them", "[container][corrupt]") {
    TempDir dir;
    auto attempt = [&](nlohmann::json meta) {
        aff::ContainerWriter w(dir / "m.aff");
        w.set_metadata(std::move(meta));
        w.finish();
    };
    CHECK_THROWS_WITH(attempt({{"role", "teacher"}}), Catch::EndsWith("metadata: role: expected \"main\" or \"draft\""));
    CHECK_THROWS_WITH(attempt({{"codebook_id", "xyz"}}), Catch::EndsWith("codebook_id: expected 16 lower-case hex digits"));
    CHECK_THROWS_WITH(attempt({{"config", {{"num_hidden_layers", -1}}}}),
                      Catch::EndsWith("metadata: config.num_hidden_layers: expected a non-negative integer"));
    CHECK_NOTHROW(attempt({{"role", "draft"}, {"codebook_id", "0123456789abcdef"}}));
    CHECK(aff::Container::open(dir / "m.aff").codebook_id() == "0123456789abcdef");
}

TEST_CASE("a file that stops anywhere is refused with a message, never a crash", "[container][corrupt]") {
    TempDir dir;
    aff::test::write_tiny_fixture(dir / "t.aff");
    const auto full = read_all(dir / "t.aff");
    for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{63}, std::size_t{64}, std::size_t{4096}, full.size() - 1}) {
        std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK_THROWS_AS(aff::Container::open_bytes(cut, "cut"), aff::Error);
    }
}
