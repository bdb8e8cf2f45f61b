// The damaged containers under tests/data/bad/, each made from tiny.aff by changing one
// thing, and the exact message the reader (or the digest check) must give for it.
// container_fixture_test.cpp keeps the committed files equal to these recipes.
#pragma once

#include "tiny_fixture.hpp"

#include "libaff/container/container.hpp"

#include <functional>
#include <string>
#include <vector>

namespace aff::test {

struct BadFixture {
    std::string name;     // file name under tests/data/bad/
    std::string message;  // what follows "<path>: " in the error
    bool on_open;         // false: opens fine, the digest check fails
    std::function<void(std::vector<std::uint8_t>&, const Container&)> damage;
};

// Byte offset of tensor `name`'s directory record in the file.
inline std::uint64_t tensor_record(const Container& c, const std::string& name) {
    namespace L = container_layout;
    const SectionInfo* dir = c.find_section(kSectionDirectory);
    for (std::size_t i = 0; i < c.tensors().size(); ++i)
        if (c.tensors()[i].name == name)
            return dir->offset + L::kDirHeaderSize + c.experts().size() * L::kExtentRecordSize + i * L::kTensorRecordSize;
    throw std::runtime_error("no tensor " + name);
}

inline std::uint64_t section_entry(const Container& c, const SectionId& id) {
    namespace L = container_layout;
    const std::uint64_t table = L::load_u64(c.file_bytes().data() + L::kOffTableOffset);
    for (std::size_t i = 0; i < c.sections().size(); ++i)
        if (c.sections()[i].id == id) return table + i * L::kSectionEntrySize;
    throw std::runtime_error("no section");
}

inline std::vector<BadFixture> bad_fixtures() {
    namespace L = container_layout;
    using Bytes = std::vector<std::uint8_t>;
    return {
        {"truncated.aff", "file is truncated: header says 20968 bytes, file has 12288", true,
         [](Bytes& f, const Container&) { f.resize(12288); }},
        {"wrong-magic.aff", "not an .aff container (wrong magic)", true, [](Bytes& f, const Container&) { f[1] = 'X'; }},
        {"newer-version.aff", "format version 2 is newer than this reader supports (1)", true,
         [](Bytes& f, const Container&) {
             L::store_u32(&f[L::kOffVersion], 2);
             reseal(f);
         }},
        {"directory-past-eof.aff", "section TDIR: offset 0x5000 + size 2774 runs past end of file (20968 bytes)", true,
         [](Bytes& f, const Container& c) {
             L::store_u64(&f[section_entry(c, kSectionDirectory) + 8], 0x5000);
             reseal(f);
         }},
        {"overlapping-tensors.aff", "tensor layers.0.attn.wkv.scale overlaps tensor layers.0.attn.wkv.weight", true,
         [](Bytes& f, const Container& c) {
             L::store_u64(&f[tensor_record(c, "layers.0.attn.wkv.scale")], c.tensor("layers.0.attn.wkv.weight").offset);
             reseal(f);
         }},
        {"extent-misaligned.aff", "extent layers.0.ffn.experts.1: offset 0x2040 not aligned to 4096", true,
         [](Bytes& f, const Container& c) {
             const std::uint64_t rec = c.find_section(kSectionDirectory)->offset + L::kDirHeaderSize;
             L::store_u64(&f[rec], L::load_u64(&f[rec]) + 64);
             reseal(f);
         }},
        {"length-mismatch.aff", "tensor norm.weight: length 15 does not match BF16 [8] (16 bytes)", true,
         [](Bytes& f, const Container& c) {
             L::store_u64(&f[tensor_record(c, "norm.weight") + 8], 15);
             reseal(f);
         }},
        {"expert-out-of-range.aff", "extent layers.1.ffn.experts.3: expert 3 out of range (config n_routed_experts = 2)", true,
         [](Bytes& f, const Container& c) {
             const SectionInfo* meta = c.find_section(kSectionMeta);
             std::string text(f.begin() + meta->offset, f.begin() + meta->offset + meta->size);
             const std::string key = "\"n_routed_experts\": 4";
             text.replace(text.find(key), key.size(), "\"n_routed_experts\": 2");
             std::copy(text.begin(), text.end(), f.begin() + meta->offset);
             reseal(f);
         }},
        {"bad-metadata.aff", "metadata: invalid JSON", true,
         [](Bytes& f, const Container& c) {
             f[c.find_section(kSectionMeta)->offset] = '@';
             reseal(f);
         }},
        {"unknown-required-section.aff", "section XTRA is marked required but this reader does not know it", true,
         [](Bytes& f, const Container& c) {
             const std::uint64_t e = section_entry(c, kSectionChatTemplate);
             std::memcpy(&f[e], "XTRA", 4);
             L::store_u32(&f[e + 4], L::kSectionRequired);
             reseal(f);
         }},
        {"flipped-byte.aff", "tensor layers.1.ffn.experts.3.w2.weight: digest mismatch", false,
         [](Bytes& f, const Container& c) { f[c.tensor("layers.1.ffn.experts.3.w2.weight").offset + 5] ^= 0x10; }},
    };
}

}  // namespace aff::test
