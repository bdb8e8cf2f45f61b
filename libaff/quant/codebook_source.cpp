// Loading the codebook of a draft's main container (codebook_source.hpp).
#include "libaff/quant/codebook_source.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/mapped_file.hpp"

#include <cstring>
#include <optional>

namespace aff::quant {

namespace {
CodebookSource from_bytes(std::span<const std::uint8_t> bytes, const std::string& what, bool container) {
    Codebook cb = Codebook::parse(bytes, what);
    std::vector<std::uint8_t> serialized = cb.serialize();
    std::string id = to_hex(xxh3_64(serialized.data(), serialized.size()));
    return {std::move(cb), std::move(serialized), std::move(id), container};
}
}  // namespace

CodebookSource load_codebook_source(const std::string& path) {
    static constexpr std::uint8_t kContainerMagic[8] = {0x89, 'A', 'F', 'F', 0x0D, 0x0A, 0x1A, 0x0A};
    std::optional<CodebookSource> standalone = parse_mapped_file(path, [](std::span<const std::uint8_t> b) {
        if (b.size() >= 8 && std::memcmp(b.data(), kContainerMagic, 8) == 0) return std::optional<CodebookSource>();
        return std::optional<CodebookSource>(from_bytes(b, "", false));
    });
    if (standalone) return std::move(*standalone);
    const Container c = Container::open(path);
    const auto section = c.codebook();
    if (!section)
        throw_format("has no codebook section (CBOK): give the main container or a codebook file", path);
    try {
        return from_bytes(*section, "section CBOK", true);
    } catch (Error& e) {
        e.set_path_if_empty(path);
        throw;
    }
}

CodebookSource builtin_codebook_source() {
    const Codebook& cb = Codebook::builtin();
    std::vector<std::uint8_t> serialized = cb.serialize();
    std::string id = to_hex(xxh3_64(serialized.data(), serialized.size()));
    return {cb, std::move(serialized), std::move(id), false};
}

}  // namespace aff::quant
