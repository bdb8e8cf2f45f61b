// Writes an .aff container (formats/container.md) through aff::AtomicFile: nothing
// appears under the final name until finish() has written everything, re-read and
// validated it with the reader, fsynced and renamed. Tensor bytes are streamed: a
// tensor is begun, fed in as many spans as the caller likes, and ended, so a 150 GB
// model never has to sit in memory; each tensor's XXH3-64 is computed as it passes.
// Routed-expert tensors go between begin_expert()/end_expert(), which makes them one
// contiguous 4096-aligned extent.
#pragma once

#include "libaff/container/container.hpp"
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/hash.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {

class ContainerWriter {
public:
    explicit ContainerWriter(std::string path);
    ~ContainerWriter();  // without finish(), the temporary is deleted
    ContainerWriter(const ContainerWriter&) = delete;
    ContainerWriter& operator=(const ContainerWriter&) = delete;

    // The META object (formats/container.md §5): "config" (config.json verbatim),
    // "quantiser", "provenance", "role", "codebook_id". Written at finish().
    void set_metadata(nlohmann::json metadata);
    void set_tokenizer_json(std::string text);
    void set_chat_template(std::string text);
    void set_expert_profile(std::vector<std::uint8_t> bytes);  // formats/expert-profile.md
    void set_codebook(std::vector<std::uint8_t> bytes);        // its id is its XXH3-64
    // Any other section; `required` sets the flag that makes unknowing readers reject.
    void set_section(const SectionId& id, std::vector<std::uint8_t> bytes, bool required = false);

    // Routed experts: tensors begun between these belong to the extent of `key` and must
    // be named "<expert_prefix(key)>.<rest>".
    void begin_expert(const ExpertKey& key);
    void end_expert();

    // Streams one tensor. For a type with a size rule the bytes written must add up to
    // storage_bytes(type, shape); for an explicit-length type the total is its length.
    void begin_tensor(std::string name, StorageType type, std::vector<std::uint64_t> shape);
    void write(std::span<const std::uint8_t> bytes);
    void write(const void* data, std::size_t size) { write({static_cast<const std::uint8_t*>(data), size}); }
    void end_tensor();
    void add_tensor(std::string name, StorageType type, std::vector<std::uint64_t> shape,
                    std::span<const std::uint8_t> bytes) {
        begin_tensor(std::move(name), type, std::move(shape));
        write(bytes);
        end_tensor();
    }

    // Writes sections, directory, table and header; validates by reopening; commits.
    void finish();

    const std::string& path() const { return file_.final_path(); }
    std::uint64_t bytes_written() const { return file_.offset(); }

private:
    struct Tensor {
        std::string name;
        StorageType type;
        std::vector<std::uint64_t> shape;
        std::uint64_t offset = 0, length = 0, digest = 0;
        std::uint32_t extent;
    };
    struct Extent {
        ExpertKey key;
        std::uint64_t offset = 0, size = 0;
    };
    struct Section {
        SectionId id;
        std::vector<std::uint8_t> bytes;
        bool required;
    };
    std::vector<std::uint8_t> directory_bytes() const;

    AtomicFile file_;
    nlohmann::json metadata_ = nlohmann::json::object();
    std::vector<Section> sections_;
    std::vector<Tensor> tensors_;
    std::vector<Extent> extents_;
    std::map<ExpertKey, std::uint32_t> extent_index_;
    std::map<std::string, std::uint32_t, std::less<>> names_;
    bool in_extent_ = false;
    bool in_tensor_ = false;
    bool finished_ = false;
    std::unique_ptr<Xxh3Stream> hasher_;
    std::uint64_t expected_length_ = 0;
    bool sized_ = true;
};

}  // namespace aff
