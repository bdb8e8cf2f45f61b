// The codebook a draft container is quantised against (aff-quantize --dspark
// --codebook FILE): FILE is either the main .aff container, whose CBOK section is
// taken, or a standalone codebook file (formats/quant-codebook.md §3); the first bytes
// tell which. Both hold the same 16416 bytes, whose XXH3-64 is the codebook id that
// containers record (formats/container.md §6.2).
#pragma once

#include "libaff/quant/codebook.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace aff::quant {

struct CodebookSource {
    Codebook codebook;
    std::vector<std::uint8_t> bytes;  // the serialised codebook (a CBOK section's content)
    std::string id;                   // 16 hex digits: XXH3-64 of `bytes`
    bool from_container = false;
};

// Throws aff::Error naming the file: unreadable, neither form, a container without a
// CBOK section (a draft carries only the id), or a damaged codebook.
CodebookSource load_codebook_source(const std::string& path);
// The built-in codebook as a source.
CodebookSource builtin_codebook_source();

}  // namespace aff::quant
