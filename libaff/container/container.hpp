// Reads an .aff container (formats/container.md): header, section table, JSON metadata
// and tensor directory with its per-(layer, expert) extents. The file is memory-mapped;
// open() validates the whole structure (every offset, size, alignment, overlap, name,
// type and length, and the directory against the model config when present) and throws
// aff::Error naming the file and the tensor/field at fault. It never hashes tensor data;
// that is verify.hpp's job, on request. Never touches device memory: libaff/gpu maps
// the extents this returns.
#pragma once

#include "libaff/container/storage_type.hpp"
#include "libaff/container/tensor_names.hpp"
#include "libaff/core/mapped_file.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace aff {

// Four ASCII bytes naming a section (formats/container.md §4).
using SectionId = std::array<char, 4>;
constexpr SectionId kSectionData{'D', 'A', 'T', 'A'};       // tensor bytes (required)
constexpr SectionId kSectionMeta{'M', 'E', 'T', 'A'};       // JSON metadata (required)
constexpr SectionId kSectionDirectory{'T', 'D', 'I', 'R'};  // tensor directory (required)
constexpr SectionId kSectionTokenizer{'T', 'O', 'K', 'J'};  // tokenizer.json verbatim
constexpr SectionId kSectionChatTemplate{'C', 'H', 'A', 'T'};
constexpr SectionId kSectionExpertProfile{'P', 'R', 'O', 'F'};  // formats/expert-profile.md
constexpr SectionId kSectionCodebook{'C', 'B', 'O', 'K'};       // defined by libaff/quant
std::string to_string(const SectionId& id);

struct SectionInfo {
    SectionId id{};
    bool required = false;  // a reader that does not know the ID must reject the file
    std::uint64_t offset = 0, size = 0, digest = 0;
};

struct TensorInfo {
    std::string name;
    StorageType type{};
    std::vector<std::uint64_t> shape;  // rank 0..4; logical elements (FP4: unpacked count)
    std::uint64_t offset = 0;          // absolute offset in the file
    std::uint64_t length = 0;          // bytes
    std::uint64_t digest = 0;          // XXH3-64 of the bytes
    std::int32_t extent = -1;          // index into Container::experts(), -1 when dense
    std::uint64_t offset_in_extent = 0;  // when extent >= 0
    TensorClass cls = TensorClass::dense;
    std::uint64_t elements() const;
};

struct ExpertExtent {
    ExpertKey key;
    std::uint64_t offset = 0;  // absolute, multiple of 4096
    std::uint64_t size = 0;
    std::vector<std::uint32_t> tensors;  // indices into Container::tensors(), directory order
};

class Container {
public:
    // Maps and validates `path`; throws aff::Error (io or format or unsupported).
    static Container open(const std::string& path);
    // Validates bytes held elsewhere (fuzzing, parts mapped together); `name` is used
    // in messages. The bytes must outlive the Container.
    static Container open_bytes(std::span<const std::uint8_t> bytes, const std::string& name);

    Container(Container&&) noexcept = default;
    Container& operator=(Container&&) noexcept = default;

    const std::string& path() const { return path_; }
    std::uint32_t version() const { return version_; }
    std::uint64_t file_size() const { return bytes_.size(); }
    std::span<const std::uint8_t> file_bytes() const { return bytes_; }

    const std::vector<SectionInfo>& sections() const { return sections_; }
    const SectionInfo* find_section(const SectionId& id) const;
    std::optional<std::span<const std::uint8_t>> section_bytes(const SectionId& id) const;

    // The META object; config() is its "config" member (the model's config.json) or null.
    const nlohmann::json& metadata() const { return metadata_; }
    const nlohmann::json* config() const;
    std::optional<std::string_view> tokenizer_json() const;
    std::optional<std::string_view> chat_template() const;
    std::optional<std::span<const std::uint8_t>> expert_profile() const;
    std::optional<std::span<const std::uint8_t>> codebook() const;
    // 16 hex digits: XXH3-64 of the codebook section, or for a container without one
    // (a draft) the "codebook_id" its metadata records; nullopt when neither.
    std::optional<std::string> codebook_id() const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(std::string_view name) const;
    const TensorInfo& tensor(std::string_view name) const;  // throws naming the tensor
    std::span<const std::uint8_t> bytes(const TensorInfo& t) const { return bytes_.subspan(t.offset, t.length); }

    const std::vector<ExpertExtent>& experts() const { return experts_; }
    const ExpertExtent* find_expert(const ExpertKey& key) const;
    std::span<const std::uint8_t> bytes(const ExpertExtent& e) const { return bytes_.subspan(e.offset, e.size); }

private:
    Container() = default;
    void parse();

    std::string path_;
    MappedFile file_;
    std::span<const std::uint8_t> bytes_;
    std::uint32_t version_ = 0;
    std::vector<SectionInfo> sections_;
    nlohmann::json metadata_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string_view, std::uint32_t> by_name_;
    std::vector<ExpertExtent> experts_;
    std::map<ExpertKey, std::uint32_t> by_expert_;
};

}  // namespace aff
