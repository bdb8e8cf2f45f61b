// ContainerWriter: streams tensor bytes into the data section, then writes the
// metadata, directory and section table behind it and the header in front
// (formats/container.md §3-7, "What a writer must do").
#include "libaff/container/writer.hpp"

#include "libaff/container/layout.hpp"
#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff {
namespace L = container_layout;

ContainerWriter::ContainerWriter(std::string path) : file_(std::move(path)) {
    file_.write_zeros(L::kDataStart);  // header, rewritten by finish()
}

ContainerWriter::~ContainerWriter() = default;

void ContainerWriter::set_metadata(nlohmann::json metadata) {
    if (!metadata.is_object()) throw_usage("container metadata must be a JSON object");
    metadata_ = std::move(metadata);
}

void ContainerWriter::set_section(const SectionId& id, std::vector<std::uint8_t> bytes, bool required) {
    if (id == kSectionData || id == kSectionMeta || id == kSectionDirectory)
        throw_internal("section " + to_string(id) + " is written by ContainerWriter itself");
    auto it = std::find_if(sections_.begin(), sections_.end(), [&](const Section& s) { return s.id == id; });
    if (it != sections_.end()) sections_.erase(it);
    sections_.push_back({id, std::move(bytes), required});
}

void ContainerWriter::set_tokenizer_json(std::string text) {
    set_section(kSectionTokenizer, {text.begin(), text.end()});
}
void ContainerWriter::set_chat_template(std::string text) {
    set_section(kSectionChatTemplate, {text.begin(), text.end()});
}
void ContainerWriter::set_expert_profile(std::vector<std::uint8_t> bytes) { set_section(kSectionExpertProfile, std::move(bytes)); }
void ContainerWriter::set_codebook(std::vector<std::uint8_t> bytes) { set_section(kSectionCodebook, std::move(bytes)); }

void ContainerWriter::begin_expert(const ExpertKey& key) {
    if (in_tensor_ || in_extent_) throw_internal("begin_expert inside a tensor or another expert");
    if (extent_index_.count(key)) throw_usage("expert " + expert_prefix(key) + " written twice");
    file_.pad_to(L::kExtentAlignment);
    extent_index_.emplace(key, static_cast<std::uint32_t>(extents_.size()));
    extents_.push_back({key, file_.offset(), 0});
    in_extent_ = true;
}

void ContainerWriter::end_expert() {
    if (!in_extent_ || in_tensor_) throw_internal("end_expert without begin_expert, or inside a tensor");
    Extent& x = extents_.back();
    x.size = file_.offset() - x.offset;
    if (x.size == 0) throw_usage("expert " + expert_prefix(x.key) + " has no tensors");
    in_extent_ = false;
}

void ContainerWriter::begin_tensor(std::string name, StorageType type, std::vector<std::uint64_t> shape) {
    if (in_tensor_) throw_internal("begin_tensor inside tensor " + tensors_.back().name);
    if (name.empty() || name.size() > 0xFFFF ||
        std::any_of(name.begin(), name.end(), [](char c) { return c < 0x21 || c > 0x7E; }))
        throw_usage("tensor name '" + name + "' must be 1-65535 printable ASCII bytes without spaces");
    if (names_.count(name)) throw_usage("tensor " + name + " written twice");
    if (shape.size() > L::kMaxRank) throw_usage("tensor " + name + ": rank above 4");
    const StorageTypeInfo* info = storage_type_info(type);
    if (!info) throw_usage("tensor " + name + ": unknown storage type");
    const auto owner = expert_of_tensor(name);
    if (in_extent_ && (!owner || *owner != extents_.back().key))
        throw_usage("tensor " + name + " written inside expert " + expert_prefix(extents_.back().key));
    if (!in_extent_ && owner) throw_usage("tensor " + name + " is a routed-expert tensor: write it between begin_expert and end_expert");
    sized_ = info->block_elems != 0;
    if (sized_) {
        auto bytes = storage_bytes(type, shape);
        if (!bytes) throw_usage("tensor " + name + ": shape too large");
        expected_length_ = *bytes;
    }
    file_.pad_to(L::kTensorAlignment);
    names_.emplace(name, static_cast<std::uint32_t>(tensors_.size()));
    Tensor t{std::move(name), type, std::move(shape), file_.offset(), 0, 0,
             in_extent_ ? static_cast<std::uint32_t>(extents_.size() - 1) : L::kNoExtent};
    tensors_.push_back(std::move(t));
    hasher_ = std::make_unique<Xxh3Stream>();
    in_tensor_ = true;
}

void ContainerWriter::write(std::span<const std::uint8_t> bytes) {
    if (!in_tensor_) throw_internal("write outside a tensor");
    Tensor& t = tensors_.back();
    if (sized_ && bytes.size() > expected_length_ - t.length)
        throw_usage("tensor " + t.name + ": more bytes than " + std::string(to_string(t.type)) + " of its shape takes (" +
                    std::to_string(expected_length_) + ")");
    hasher_->update(bytes.data(), bytes.size());
    file_.write(bytes);
    t.length += bytes.size();
}

void ContainerWriter::end_tensor() {
    if (!in_tensor_) throw_internal("end_tensor without begin_tensor");
    Tensor& t = tensors_.back();
    if (sized_ && t.length != expected_length_)
        throw_usage("tensor " + t.name + ": got " + std::to_string(t.length) + " bytes, its type and shape take " +
                    std::to_string(expected_length_));
    if (!sized_ && t.length == 0) throw_usage("tensor " + t.name + ": no bytes");
    t.digest = hasher_->digest();
    hasher_.reset();
    in_tensor_ = false;
}

std::vector<std::uint8_t> ContainerWriter::directory_bytes() const {
    std::string names;
    for (const Tensor& t : tensors_) names += t.name;
    std::vector<std::uint8_t> out(L::kDirHeaderSize + extents_.size() * L::kExtentRecordSize +
                                  tensors_.size() * L::kTensorRecordSize + names.size());
    std::uint8_t* p = out.data();
    L::store_u32(p, static_cast<std::uint32_t>(tensors_.size()));
    L::store_u32(p + 4, static_cast<std::uint32_t>(extents_.size()));
    L::store_u64(p + 8, names.size());
    p += L::kDirHeaderSize;
    for (const Extent& x : extents_) {
        L::store_u64(p, x.offset);
        L::store_u64(p + 8, x.size);
        L::store_u32(p + 16, x.key.layer);
        L::store_u32(p + 20, x.key.expert);
        L::store_u32(p + 24, x.key.draft ? L::kExtentDraft : 0);
        p += L::kExtentRecordSize;
    }
    std::uint32_t name_offset = 0;
    for (const Tensor& t : tensors_) {
        const bool member = t.extent != L::kNoExtent;
        L::store_u64(p, member ? t.offset - extents_[t.extent].offset : t.offset);
        L::store_u64(p + 8, t.length);
        L::store_u64(p + 16, t.digest);
        for (std::size_t k = 0; k < t.shape.size(); ++k) L::store_u64(p + 24 + 8 * k, t.shape[k]);
        L::store_u32(p + 56, name_offset);
        L::store_u16(p + 60, static_cast<std::uint16_t>(t.name.size()));
        L::store_u16(p + 62, static_cast<std::uint16_t>(t.type));
        L::store_u32(p + 64, t.extent);
        p[68] = static_cast<std::uint8_t>(t.shape.size());
        name_offset += static_cast<std::uint32_t>(t.name.size());
        p += L::kTensorRecordSize;
    }
    std::copy(names.begin(), names.end(), p);
    return out;
}

void ContainerWriter::finish() {
    if (finished_) throw_internal("finish called twice");
    if (in_tensor_ || in_extent_) throw_internal("finish inside a tensor or an expert");
    if (names_.size() > 0xFFFFFFFFull) throw_usage("too many tensors");
    const std::uint64_t data_size = file_.offset() - L::kDataStart;

    struct Entry {
        SectionId id;
        std::uint32_t flags;
        std::uint64_t offset, size, digest;
    };
    std::vector<Entry> entries{{kSectionData, L::kSectionRequired, L::kDataStart, data_size, 0}};
    auto put = [&](const SectionId& id, std::span<const std::uint8_t> bytes, bool required) {
        file_.pad_to(L::kSectionAlignment);
        entries.push_back({id, required ? L::kSectionRequired : 0u, file_.offset(), bytes.size(),
                           xxh3_64(bytes.data(), bytes.size())});
        file_.write(bytes);
    };
    const std::string meta = metadata_.dump(2) + "\n";
    put(kSectionMeta, {reinterpret_cast<const std::uint8_t*>(meta.data()), meta.size()}, true);
    const std::vector<std::uint8_t> dir = directory_bytes();
    put(kSectionDirectory, dir, true);
    for (const Section& s : sections_) put(s.id, s.bytes, s.required);

    file_.pad_to(L::kSectionAlignment);
    const std::uint64_t table_offset = file_.offset();
    std::vector<std::uint8_t> table(entries.size() * L::kSectionEntrySize);
    for (std::size_t i = 0; i < entries.size(); ++i) {
        std::uint8_t* e = table.data() + i * L::kSectionEntrySize;
        std::memcpy(e, entries[i].id.data(), 4);
        L::store_u32(e + 4, entries[i].flags);
        L::store_u64(e + 8, entries[i].offset);
        L::store_u64(e + 16, entries[i].size);
        L::store_u64(e + 24, entries[i].digest);
    }
    file_.write(table);

    std::uint8_t header[L::kHeaderSize] = {};
    std::copy(L::kMagic.begin(), L::kMagic.end(), header);
    L::store_u32(header + L::kOffVersion, L::kVersion);
    L::store_u32(header + L::kOffHeaderSize, L::kHeaderSize);
    L::store_u64(header + L::kOffFileSize, file_.offset());
    L::store_u64(header + L::kOffTableOffset, table_offset);
    L::store_u32(header + L::kOffSectionCount, static_cast<std::uint32_t>(entries.size()));
    L::store_u64(header + L::kOffTableDigest, xxh3_64(table.data(), table.size()));
    L::store_u64(header + L::kOffHeaderDigest, xxh3_64(header, L::kOffHeaderDigest));
    file_.write_at(0, header, sizeof header);

    // The reader is the definition of a valid file: a writer bug must never be committed.
    // write_at() above flushed the buffer, so the temporary holds every byte.
    with_context("validating what was written", [&] { Container::open(file_.temp_path()); });
    file_.commit();
    finished_ = true;
}

}  // namespace aff
