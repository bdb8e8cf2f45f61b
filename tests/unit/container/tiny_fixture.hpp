// Builds tests/data/tiny.aff, the container every test and the spec's hex dump use, and
// the damaged copies in tests/data/bad/. Deterministic: the same bytes on every run, so
// container_fixture_test.cpp can compare them with the committed files (and rewrite
// them when AFF_REGENERATE=1). A two-layer model with 4 experts a layer, one MTP layer,
// FP8 dense weights, FP4 routed experts, and every optional section.
#pragma once

#include "libaff/container/layout.hpp"
#include "libaff/container/writer.hpp"
#include "libaff/core/hash.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace aff::test {

inline std::vector<std::uint8_t> fixture_bytes(std::size_t n, std::uint32_t seed) {
    std::vector<std::uint8_t> v(n);
    std::uint32_t x = seed * 2654435761u + 1;
    for (auto& b : v) {
        x = x * 1664525u + 1013904223u;
        b = static_cast<std::uint8_t>(x >> 24);
    }
    return v;
}

inline void write_tiny_fixture(const std::string& path) {
    ContainerWriter w(path);
    w.set_metadata({
        {"config",
         {{"architectures", {"DeepseekV4ForCausalLM"}},
          {"model_type", "deepseek_v4"},
          {"vocab_size", 16},
          {"hidden_size", 8},
          {"num_hidden_layers", 2},
          {"n_routed_experts", 4},
          {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 4},
          {"num_nextn_predict_layers", 1},
          {"compress_ratios", {0, 0, 0}}}},
        {"quantiser", nullptr},
        {"provenance",
         {{"tool", "tiny_fixture.hpp"},
          {"created", "2026-01-01T00:00:00Z"},
          {"sources", {{{"file", "model-00001-of-00001.safetensors"},
                        {"sha256", "0000000000000000000000000000000000000000000000000000000000000000"}}}},
          {"imatrix", nullptr}}},
        {"role", "main"},
    });
    std::uint32_t seed = 1;
    auto add = [&](const std::string& name, StorageType type, std::vector<std::uint64_t> shape) {
        const auto n = *storage_bytes(type, shape);
        w.add_tensor(name, type, std::move(shape), fixture_bytes(n, seed++));
    };
    add("embed.weight", StorageType::BF16, {16, 8});
    add("layers.0.attn.wkv.weight", StorageType::F8_E4M3, {8, 8});
    add("layers.0.attn.wkv.scale", StorageType::F8_E8M0, {1, 1});
    add("layers.0.ffn.gate.tid2eid", StorageType::I64, {16, 2});
    add("layers.1.ffn.gate.weight", StorageType::BF16, {4, 8});
    add("layers.1.ffn.gate.bias", StorageType::F32, {4});
    auto expert = [&](ExpertKey key) {
        w.begin_expert(key);
        const std::string p = expert_prefix(key) + ".";
        add(p + "w1.weight", StorageType::FP4_E2M1, {4, 8});
        add(p + "w1.scale", StorageType::F8_E8M0, {4, 1});
        add(p + "w2.weight", StorageType::FP4_E2M1, {8, 4});
        add(p + "w2.scale", StorageType::F8_E8M0, {8, 1});
        add(p + "w3.weight", StorageType::FP4_E2M1, {4, 8});
        add(p + "w3.scale", StorageType::F8_E8M0, {4, 1});
        w.end_expert();
    };
    expert({false, 0, 1});
    expert({false, 1, 3});
    expert({true, 0, 2});
    add("mtp.0.norm.weight", StorageType::BF16, {8});
    add("norm.weight", StorageType::BF16, {8});
    add("head.weight", StorageType::BF16, {16, 8});
    w.set_tokenizer_json("{\"model\":{\"type\":\"BPE\"}}\n");
    w.set_chat_template("<|User|>{{prompt}}<|Assistant|>");
    w.set_expert_profile(fixture_bytes(16, 100));
    w.set_codebook(fixture_bytes(32, 200));
    w.finish();
}

// Recomputes every digest of a container image (section digests except DATA, the
// table digest, the header digest), so a deliberately damaged field is reported as
// itself rather than as a digest mismatch.
inline void reseal(std::vector<std::uint8_t>& f) {
    namespace L = container_layout;
    const std::uint64_t table = L::load_u64(&f[L::kOffTableOffset]);
    const std::uint32_t count = L::load_u32(&f[L::kOffSectionCount]);
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint8_t* e = &f[table + i * L::kSectionEntrySize];
        const std::uint64_t off = L::load_u64(e + 8), size = L::load_u64(e + 16);
        if (std::string(reinterpret_cast<char*>(e), 4) != "DATA" && off + size <= f.size())
            L::store_u64(e + 24, xxh3_64(f.data() + off, size));
    }
    L::store_u64(&f[L::kOffTableDigest], xxh3_64(&f[table], count * L::kSectionEntrySize));
    L::store_u64(&f[L::kOffHeaderDigest], xxh3_64(f.data(), L::kOffHeaderDigest));
}

}  // namespace aff::test
