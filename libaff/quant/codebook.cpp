// Codebook construction, serialisation (formats/quant-codebook.md §3) and the built-in
// table. The built-in values were produced by train_codebook() (codebook_train.hpp)
// with the settings recorded in builtin_codebook.inc and are committed, so every
// build quantises with exactly the same entries.
#include "libaff/quant/codebook.hpp"

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/mapped_file.hpp"
#include "libaff/quant/half.hpp"

#include <cmath>
#include <cstring>

namespace aff::quant {

namespace {

constexpr std::uint8_t kMagic[8] = {0x89, 'A', 'Q', 'C', 0x0D, 0x0A, 0x1A, 0x0A};
constexpr std::uint32_t kVersion = 1;

const std::uint16_t kBuiltinValues[Codebook::kEntries * Codebook::kDim] = {
#include "libaff/quant/builtin_codebook.inc"
};

std::uint32_t load_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }
std::uint64_t load_u64(const std::uint8_t* p) {
    return static_cast<std::uint64_t>(load_u32(p)) | static_cast<std::uint64_t>(load_u32(p + 4)) << 32;
}
void store(std::uint8_t* p, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::vector<std::uint8_t> values_le(std::span<const std::uint16_t> v) {
    std::vector<std::uint8_t> out(v.size() * 2);
    for (std::size_t i = 0; i < v.size(); ++i) store(&out[2 * i], v[i], 2);
    return out;
}

}  // namespace

Codebook::Codebook(std::span<const std::uint16_t> fp16_values) : fp16_(fp16_values.begin(), fp16_values.end()) {
    if (fp16_.size() != static_cast<std::size_t>(kEntries * kDim))
        throw_format("codebook has " + std::to_string(fp16_.size()) + " values, expected " +
                     std::to_string(kEntries * kDim));
    for (int e = 0; e < kEntries; ++e) {
        c0_[e] = fp16_to_float(fp16_[2 * e]);
        c1_[e] = fp16_to_float(fp16_[2 * e + 1]);
        if (!std::isfinite(c0_[e]) || !std::isfinite(c1_[e]))
            throw_format("codebook entry " + std::to_string(e) + " is not finite");
    }
    const auto bytes = values_le(fp16_);
    digest_ = xxh3_64(bytes.data(), bytes.size());
}

const Codebook& Codebook::builtin() {
    static const Codebook cb(std::span<const std::uint16_t>(kBuiltinValues, kEntries * kDim));
    return cb;
}

std::vector<std::uint8_t> Codebook::serialize() const {
    std::vector<std::uint8_t> out(kSerializedBytes, 0);
    std::memcpy(out.data(), kMagic, 8);
    store(&out[8], kVersion, 4);
    store(&out[12], kWindowBits, 2);
    store(&out[14], kDim, 2);
    store(&out[16], kEntries, 4);
    // bytes 20..23 reserved, zero
    store(&out[24], digest_, 8);
    const auto v = values_le(fp16_);
    std::memcpy(&out[kHeaderBytes], v.data(), v.size());
    return out;
}

Codebook Codebook::parse(std::span<const std::uint8_t> b, const std::string& what) {
    auto body = [&] {
        if (b.size() < kHeaderBytes) throw_format("codebook truncated: " + std::to_string(b.size()) + " bytes");
        if (std::memcmp(b.data(), kMagic, 8) != 0) throw_format("not a codebook (bad magic)");
        if (load_u32(&b[8]) != kVersion)
            throw_unsupported("codebook version " + std::to_string(load_u32(&b[8])) + " (this build reads 1)");
        if (load_u16(&b[12]) != kWindowBits || load_u16(&b[14]) != kDim || load_u32(&b[16]) != kEntries)
            throw_unsupported("codebook geometry window_bits=" + std::to_string(load_u16(&b[12])) +
                              " dim=" + std::to_string(load_u16(&b[14])) + " entries=" +
                              std::to_string(load_u32(&b[16])) + " (this build reads 12/2/4096)");
        if (load_u32(&b[20]) != 0) throw_format("codebook reserved field is not zero");
        if (b.size() != kSerializedBytes)
            throw_format("codebook is " + std::to_string(b.size()) + " bytes, expected " +
                         std::to_string(kSerializedBytes));
        std::vector<std::uint16_t> v(kEntries * kDim);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = load_u16(&b[kHeaderBytes + 2 * i]);
        Codebook cb(v);
        if (cb.digest() != load_u64(&b[24])) throw_format("codebook digest mismatch");
        return cb;
    };
    return what.empty() ? body() : with_context(what, body);
}

Codebook Codebook::read_file(const std::string& path) {
    return parse_mapped_file(path, [](std::span<const std::uint8_t> bytes) { return parse(bytes, ""); });
}

void Codebook::write_file(const std::string& path) const { write_file_atomically(path, serialize()); }

}  // namespace aff::quant
