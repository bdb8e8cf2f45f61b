// Fuzzes the SHA256SUMS parser (libaff/container/sha256sums.cpp): any text must be
// parsed or refused with aff::Error, and what parses must format back to lines that
// parse to the same entries.
#include "libaff/container/sha256sums.hpp"
#include "libaff/core/error.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto lines = aff::parse_sha256sums({reinterpret_cast<const char*>(data), size}, "SHA256SUMS");
        std::string again;
        for (const auto& l : lines) again += aff::format_sha256sums_line(l);
        const auto back = aff::parse_sha256sums(again, "SHA256SUMS");
        if (back.size() != lines.size()) std::abort();
        for (std::size_t i = 0; i < lines.size(); ++i)
            if (back[i].name != lines[i].name || back[i].digest != lines[i].digest) std::abort();
    } catch (const aff::Error&) {
    }
    return 0;
}
