// Opening and validating an .aff container (formats/container.md §3-8). The checks run
// in the spec's order: header, section table, sections, metadata, directory, layout,
// config. Every failure names the file and then the section/tensor/extent/field.
#include "libaff/container/container.hpp"

#include "libaff/container/layout.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/printable.hpp"
#include "libaff/core/hash.hpp"

#include <algorithm>
#include <cstdio>

namespace aff {
namespace L = container_layout;
namespace {

// Fuzz builds skip the header, table and section digests, which random mutations would
// almost never get past, so that the fuzzer reaches the parsers behind them.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kCheckStructureDigests = false;
#else
constexpr bool kCheckStructureDigests = true;
#endif

std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

// offset + size <= limit without overflow.
bool fits(std::uint64_t offset, std::uint64_t size, std::uint64_t limit) {
    return offset <= limit && size <= limit - offset;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

bool is_hex16(const std::string& s) {
    if (s.size() != 16) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

const SectionId kKnownSections[] = {kSectionData,      kSectionMeta,          kSectionDirectory, kSectionTokenizer,
                                    kSectionChatTemplate, kSectionExpertProfile, kSectionCodebook};

bool known_section(const SectionId& id) {
    return std::find(std::begin(kKnownSections), std::end(kKnownSections), id) != std::end(kKnownSections);
}

// An optional non-negative integer field of the config; nullopt when absent.
std::optional<std::uint64_t> config_uint(const nlohmann::json& config, const char* key) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0))
        throw_format(std::string("metadata: config.") + key + ": expected a non-negative integer");
    return it->get<std::uint64_t>();
}

struct Interval {
    std::uint64_t begin, end;
    std::string label;
};

// Sorts and reports the first pair that shares a byte.
void check_no_overlap(std::vector<Interval>& v) {
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (std::size_t i = 1; i < v.size(); ++i)
        if (v[i].begin < v[i - 1].end) throw_format(v[i - 1].label + " overlaps " + v[i].label);
}

}  // namespace

std::string to_string(const SectionId& id) { return printable(std::string_view(id.data(), id.size())); }

std::uint64_t TensorInfo::elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
}

Container Container::open(const std::string& path) {
    Container c;
    c.path_ = path;
    c.file_ = MappedFile(path);
    c.bytes_ = c.file_.bytes();
    try {
        c.parse();
    } catch (Error& e) {
        e.set_path_if_empty(path);
        throw;
    }
    return c;
}

Container Container::open_bytes(std::span<const std::uint8_t> bytes, const std::string& name) {
    Container c;
    c.path_ = name;
    c.bytes_ = bytes;
    try {
        c.parse();
    } catch (Error& e) {
        e.set_path_if_empty(name);
        throw;
    }
    return c;
}

void Container::parse() {
    const std::uint8_t* p = bytes_.data();
    const std::uint64_t size = bytes_.size();

    // §3 header.
    if (size < L::kHeaderSize)
        throw_format("file is too short to be an .aff container (" + std::to_string(size) + " bytes)");
    if (!std::equal(L::kMagic.begin(), L::kMagic.end(), p)) throw_format("not an .aff container (wrong magic)");
    version_ = L::load_u32(p + L::kOffVersion);
    if (version_ > L::kVersion)
        throw_unsupported("format version " + std::to_string(version_) + " is newer than this reader supports (" +
                          std::to_string(L::kVersion) + ")");
    if (version_ == 0) throw_format("header: invalid format version 0");
    if (kCheckStructureDigests && xxh3_64(p, L::kOffHeaderDigest) != L::load_u64(p + L::kOffHeaderDigest))
        throw_format("header: digest mismatch (header is corrupt)");
    if (L::load_u32(p + L::kOffHeaderSize) != L::kHeaderSize)
        throw_format("header: header_size is " + std::to_string(L::load_u32(p + L::kOffHeaderSize)) + ", expected 64");
    if (L::load_u32(p + L::kOffReserved1) != 0 || L::load_u64(p + L::kOffReserved2) != 0)
        throw_format("header: reserved field is not zero");
    const std::uint64_t declared = L::load_u64(p + L::kOffFileSize);
    if (declared > size)
        throw_format("file is truncated: header says " + std::to_string(declared) + " bytes, file has " +
                     std::to_string(size));
    if (declared < size)
        throw_format("file has " + std::to_string(size) + " bytes but header says " + std::to_string(declared) +
                     " (trailing bytes)");

    // §4 section table.
    const std::uint64_t table_offset = L::load_u64(p + L::kOffTableOffset);
    const std::uint32_t count = L::load_u32(p + L::kOffSectionCount);
    const std::uint64_t table_size = std::uint64_t{count} * L::kSectionEntrySize;
    if (table_offset < L::kHeaderSize || !fits(table_offset, table_size, size))
        throw_format("section table: offset " + hex(table_offset) + " with " + std::to_string(count) +
                     " entries lies outside the file (" + std::to_string(size) + " bytes)");
    if (kCheckStructureDigests && xxh3_64(p + table_offset, table_size) != L::load_u64(p + L::kOffTableDigest))
        throw_format("section table: digest mismatch");
    std::vector<Interval> regions{{0, L::kHeaderSize, "header"}, {table_offset, table_offset + table_size, "section table"}};
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint8_t* e = p + table_offset + std::uint64_t{i} * L::kSectionEntrySize;
        SectionInfo s;
        std::memcpy(s.id.data(), e, 4);
        const std::uint32_t flags = L::load_u32(e + 4);
        s.required = flags & L::kSectionRequired;
        s.offset = L::load_u64(e + 8);
        s.size = L::load_u64(e + 16);
        s.digest = L::load_u64(e + 24);
        const std::string name = "section " + to_string(s.id);
        if (flags & ~L::kSectionRequired) throw_format(name + ": reserved flag bits are set");
        if (!fits(s.offset, s.size, size))
            throw_format(name + ": offset " + hex(s.offset) + " + size " + std::to_string(s.size) +
                         " runs past end of file (" + std::to_string(size) + " bytes)");
        if (find_section(s.id)) throw_format(name + " appears twice");
        if (!known_section(s.id) && s.required)
            throw_unsupported(name + " is marked required but this reader does not know it");
        if (s.size > 0) regions.push_back({s.offset, s.offset + s.size, name});
        sections_.push_back(s);
    }
    check_no_overlap(regions);
    for (const SectionId& id : {kSectionData, kSectionMeta, kSectionDirectory})
        if (!find_section(id)) throw_format("required section " + to_string(id) + " is missing");
    for (const SectionInfo& s : sections_) {
        if (s.id == kSectionData) {
            if (s.offset % L::kExtentAlignment != 0)
                throw_format("section DATA: offset " + hex(s.offset) + " not aligned to 4096");
            if (s.digest != 0) throw_format("section DATA: digest field must be zero");
        } else if (kCheckStructureDigests && xxh3_64(p + s.offset, s.size) != s.digest) {
            throw_format("section " + to_string(s.id) + ": digest mismatch");
        }
    }

    // §5 metadata.
    {
        auto meta = *section_bytes(kSectionMeta);
        metadata_ = nlohmann::json::parse(meta.begin(), meta.end(), nullptr, false);
        if (metadata_.is_discarded()) throw_format("metadata: invalid JSON");
        if (!metadata_.is_object()) throw_format("metadata: expected a JSON object");
        for (const char* key : {"config", "provenance"}) {
            auto it = metadata_.find(key);
            if (it != metadata_.end() && !it->is_object()) throw_format(std::string("metadata: ") + key + ": expected an object");
        }
        if (auto it = metadata_.find("quantiser"); it != metadata_.end() && !it->is_object() && !it->is_null())
            throw_format("metadata: quantiser: expected an object or null");
        if (auto it = metadata_.find("role"); it != metadata_.end() &&
                                              !(it->is_string() && (*it == "main" || *it == "draft")))
            throw_format("metadata: role: expected \"main\" or \"draft\"");
        if (auto it = metadata_.find("codebook_id"); it != metadata_.end()) {
            if (!it->is_string() || !is_hex16(it->get<std::string>()))
                throw_format("metadata: codebook_id: expected 16 lower-case hex digits");
            if (auto cb = codebook()) {
                const std::string actual = to_hex(xxh3_64(cb->data(), cb->size()));
                if (actual != it->get<std::string>())
                    throw_format("metadata: codebook_id " + it->get<std::string>() +
                                 " does not match the codebook section (" + actual + ")");
            }
        }
    }

    // §6-7 directory.
    const SectionInfo& data = *find_section(kSectionData);
    const SectionInfo& dir = *find_section(kSectionDirectory);
    const std::uint8_t* d = p + dir.offset;
    if (dir.size < L::kDirHeaderSize) throw_format("directory: section is too small for its header");
    const std::uint32_t tensor_count = L::load_u32(d);
    const std::uint32_t extent_count = L::load_u32(d + 4);
    const std::uint64_t names_size = L::load_u64(d + 8);
    const std::uint64_t records = L::kDirHeaderSize + std::uint64_t{extent_count} * L::kExtentRecordSize +
                                  std::uint64_t{tensor_count} * L::kTensorRecordSize;
    if (records > dir.size || names_size != dir.size - records)
        throw_format("directory: " + std::to_string(tensor_count) + " tensors, " + std::to_string(extent_count) +
                     " extents and " + std::to_string(names_size) + " name bytes do not fill its " +
                     std::to_string(dir.size) + " bytes");
    const std::uint8_t* ext_rec = d + L::kDirHeaderSize;
    const std::uint8_t* ten_rec = ext_rec + std::uint64_t{extent_count} * L::kExtentRecordSize;
    const char* names = reinterpret_cast<const char*>(ten_rec + std::uint64_t{tensor_count} * L::kTensorRecordSize);

    const std::uint64_t data_end = data.offset + data.size;
    std::vector<Interval> spans;
    experts_.reserve(extent_count);
    for (std::uint32_t i = 0; i < extent_count; ++i) {
        const std::uint8_t* r = ext_rec + std::uint64_t{i} * L::kExtentRecordSize;
        ExpertExtent x;
        x.offset = L::load_u64(r);
        x.size = L::load_u64(r + 8);
        x.key.layer = L::load_u32(r + 16);
        x.key.expert = L::load_u32(r + 20);
        const std::uint32_t flags = L::load_u32(r + 24);
        x.key.draft = flags & L::kExtentDraft;
        const std::string name = "extent " + expert_prefix(x.key);
        if ((flags & ~L::kExtentDraft) != 0 || L::load_u32(r + 28) != 0)
            throw_format(name + ": reserved field is not zero");
        if (x.offset % L::kExtentAlignment != 0)
            throw_format(name + ": offset " + hex(x.offset) + " not aligned to 4096");
        if (x.size == 0) throw_format(name + ": size is zero");
        if (x.offset < data.offset || !fits(x.offset, x.size, data_end))
            throw_format(name + ": bytes [" + hex(x.offset) + ", +" + std::to_string(x.size) +
                         ") lie outside the data section");
        if (!by_expert_.emplace(x.key, i).second) throw_format(name + " appears twice");
        spans.push_back({x.offset, x.offset + x.size, name});
        experts_.push_back(std::move(x));
    }

    tensors_.reserve(tensor_count);
    by_name_.reserve(tensor_count);
    for (std::uint32_t i = 0; i < tensor_count; ++i) {
        const std::uint8_t* r = ten_rec + std::uint64_t{i} * L::kTensorRecordSize;
        TensorInfo t;
        const std::uint32_t name_offset = L::load_u32(r + 56);
        const std::uint16_t name_size = L::load_u16(r + 60);
        if (name_size == 0 || !fits(name_offset, name_size, names_size))
            throw_format("directory: tensor #" + std::to_string(i) + ": name lies outside the name table");
        t.name.assign(names + name_offset, name_size);
        for (char c : t.name)
            if (c < 0x21 || c > 0x7E)
                throw_format("directory: tensor #" + std::to_string(i) + ": name has a byte outside printable ASCII");
        const std::string name = "tensor " + t.name;
        const std::uint16_t type_id = L::load_u16(r + 62);
        const std::uint32_t extent = L::load_u32(r + 64);
        const std::uint8_t rank = r[68];
        t.offset = L::load_u64(r);
        t.length = L::load_u64(r + 8);
        t.digest = L::load_u64(r + 16);
        if (r[69] != 0 || r[70] != 0 || r[71] != 0) throw_format(name + ": reserved field is not zero");
        const StorageTypeInfo* type = storage_type_info(type_id);
        if (!type) throw_unsupported(name + ": storage type " + std::to_string(type_id) + " is not known to this reader");
        t.type = type->type;
        if (rank > L::kMaxRank) throw_format(name + ": rank " + std::to_string(rank) + " exceeds 4");
        for (std::uint32_t k = 0; k < L::kMaxRank; ++k) {
            const std::uint64_t dim = L::load_u64(r + 24 + 8 * k);
            if (k < rank) t.shape.push_back(dim);
            else if (dim != 0) throw_format(name + ": dimension " + std::to_string(k) + " is set beyond rank " + std::to_string(rank));
        }
        if (auto expected = storage_bytes(t.type, t.shape)) {
            if (*expected != t.length)
                throw_format(name + ": length " + std::to_string(t.length) + " does not match " +
                             std::string(type->name) + " " + shape_text(t.shape) + " (" + std::to_string(*expected) + " bytes)");
        } else if (type->block_elems != 0) {
            throw_format(name + ": shape " + shape_text(t.shape) + " is too large");
        } else if (t.length == 0) {
            throw_format(name + ": length is zero");
        }
        if (t.offset % L::kTensorAlignment != 0)
            throw_format(name + ": offset " + hex(t.offset) + " not aligned to 64");
        const std::optional<ExpertKey> owner = expert_of_tensor(t.name);
        if (extent == L::kNoExtent) {
            if (owner) throw_format(name + ": is a routed-expert tensor but is not stored in an extent");
            if (t.offset < data.offset || !fits(t.offset, t.length, data_end))
                throw_format(name + ": bytes [" + hex(t.offset) + ", +" + std::to_string(t.length) +
                             ") lie outside the data section");
            if (t.length > 0) spans.push_back({t.offset, t.offset + t.length, name});
        } else {
            if (extent >= experts_.size())
                throw_format(name + ": extent index " + std::to_string(extent) + " out of range (" +
                             std::to_string(experts_.size()) + " extents)");
            ExpertExtent& x = experts_[extent];
            if (!owner || *owner != x.key)
                throw_format(name + ": stored in extent " + expert_prefix(x.key) + " but its name does not belong to it");
            if (!fits(t.offset, t.length, x.size))
                throw_format(name + ": offset " + hex(t.offset) + " + length " + std::to_string(t.length) +
                             " runs past the end of its extent (" + std::to_string(x.size) + " bytes)");
            t.extent = static_cast<std::int32_t>(extent);
            t.offset_in_extent = t.offset;
            t.offset += x.offset;
            x.tensors.push_back(i);
        }
        t.cls = classify_tensor(t.name);
        tensors_.push_back(std::move(t));
        if (!by_name_.emplace(tensors_.back().name, i).second) throw_format(name + " appears twice");
    }
    // by_name_ keys view tensors_' strings: tensors_ was reserved, so they never moved.

    check_no_overlap(spans);
    for (const ExpertExtent& x : experts_) {
        if (x.tensors.empty()) throw_format("extent " + expert_prefix(x.key) + ": holds no tensors");
        std::vector<Interval> inner;
        for (std::uint32_t ti : x.tensors) {
            const TensorInfo& t = tensors_[ti];
            if (t.length > 0) inner.push_back({t.offset, t.offset + t.length, "tensor " + t.name});
        }
        check_no_overlap(inner);
    }

    // §8 consistency with the model config.
    if (const nlohmann::json* cfg = config()) {
        const auto layers = config_uint(*cfg, "num_hidden_layers");
        const auto experts = config_uint(*cfg, "n_routed_experts");
        std::optional<std::uint64_t> drafts = config_uint(*cfg, "num_nextn_predict_layers");
        if (auto it = cfg->find("compress_ratios"); layers && it != cfg->end() && it->is_array() && it->size() > *layers)
            drafts = std::max<std::uint64_t>(drafts.value_or(0), it->size() - *layers);
        for (const ExpertExtent& x : experts_) {
            const std::string name = "extent " + expert_prefix(x.key);
            if (!x.key.draft && layers && x.key.layer >= *layers)
                throw_format(name + ": layer " + std::to_string(x.key.layer) + " out of range (config num_hidden_layers = " +
                             std::to_string(*layers) + ")");
            if (x.key.draft && drafts && x.key.layer >= *drafts)
                throw_format(name + ": draft stage " + std::to_string(x.key.layer) + " out of range (config has " +
                             std::to_string(*drafts) + " draft layers)");
            if (experts && x.key.expert >= *experts)
                throw_format(name + ": expert " + std::to_string(x.key.expert) + " out of range (config n_routed_experts = " +
                             std::to_string(*experts) + ")");
        }
        for (const TensorInfo& t : tensors_) {
            auto ref = layer_of_tensor(t.name);
            if (!ref) continue;
            if (!ref->draft && layers && ref->index >= *layers)
                throw_format("tensor " + t.name + ": layer " + std::to_string(ref->index) +
                             " out of range (config num_hidden_layers = " + std::to_string(*layers) + ")");
            if (ref->draft && drafts && ref->index >= *drafts)
                throw_format("tensor " + t.name + ": draft stage " + std::to_string(ref->index) + " out of range (config has " +
                             std::to_string(*drafts) + " draft layers)");
        }
    }
}

const SectionInfo* Container::find_section(const SectionId& id) const {
    for (const SectionInfo& s : sections_)
        if (s.id == id) return &s;
    return nullptr;
}

std::optional<std::span<const std::uint8_t>> Container::section_bytes(const SectionId& id) const {
    const SectionInfo* s = find_section(id);
    if (!s) return std::nullopt;
    return bytes_.subspan(s->offset, s->size);
}

const nlohmann::json* Container::config() const {
    auto it = metadata_.find("config");
    return it == metadata_.end() ? nullptr : &*it;
}

std::optional<std::string_view> Container::tokenizer_json() const {
    auto b = section_bytes(kSectionTokenizer);
    if (!b) return std::nullopt;
    return std::string_view(reinterpret_cast<const char*>(b->data()), b->size());
}

std::optional<std::string_view> Container::chat_template() const {
    auto b = section_bytes(kSectionChatTemplate);
    if (!b) return std::nullopt;
    return std::string_view(reinterpret_cast<const char*>(b->data()), b->size());
}

std::optional<std::span<const std::uint8_t>> Container::expert_profile() const {
    return section_bytes(kSectionExpertProfile);
}
std::optional<std::span<const std::uint8_t>> Container::codebook() const { return section_bytes(kSectionCodebook); }

std::optional<std::string> Container::codebook_id() const {
    if (auto cb = codebook()) return to_hex(xxh3_64(cb->data(), cb->size()));
    auto it = metadata_.find("codebook_id");
    if (it != metadata_.end() && it->is_string()) return it->get<std::string>();
    return std::nullopt;
}

const TensorInfo* Container::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& Container::tensor(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    throw_format("tensor " + std::string(name) + " is not in the container", path_);
}

const ExpertExtent* Container::find_expert(const ExpertKey& key) const {
    auto it = by_expert_.find(key);
    return it == by_expert_.end() ? nullptr : &experts_[it->second];
}

}  // namespace aff
