// MemAvailable from /proc/meminfo (host_memory.hpp).
#include "libaff/core/host_memory.hpp"

#include <cctype>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace aff {

std::optional<std::uint64_t> parse_mem_available(std::string_view text) {
    constexpr std::string_view key = "MemAvailable:";
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        std::string_view line = text.substr(at, end - at);
        at = end + 1;
        if (line.substr(0, key.size()) != key) continue;
        line.remove_prefix(key.size());
        while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        std::uint64_t kb = 0;
        std::size_t digits = 0;
        while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) {
            const std::uint64_t d = std::uint64_t(line[digits] - '0');
            if (kb > (std::numeric_limits<std::uint64_t>::max() / 1024 - d) / 10) return std::nullopt;
            kb = kb * 10 + d;
            ++digits;
        }
        line.remove_prefix(digits);
        if (digits == 0 || line != " kB") return std::nullopt;
        return kb * 1024;
    }
    return std::nullopt;
}

std::uint64_t host_mem_available() {
    std::ifstream in("/proc/meminfo");
    if (!in) return 0;
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return parse_mem_available(text).value_or(0);
}

}  // namespace aff
