// Parsing of token-id lists (token_list.hpp).
#include "libaff/runtime/token_list.hpp"

#include "libaff/core/error.hpp"

#include <charconv>
#include <string>

namespace aff {

std::vector<std::int32_t> parse_token_list(std::string_view text) {
    std::vector<std::int32_t> out;
    std::size_t i = 0;
    auto is_sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (i < text.size()) {
        while (i < text.size() && is_sep(text[i])) ++i;
        if (i == text.size()) break;
        std::size_t j = i;
        while (j < text.size() && !is_sep(text[j])) ++j;
        const std::string_view item = text.substr(i, j - i);
        std::int32_t value = 0;
        auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
        if (ec != std::errc() || end != item.data() + item.size() || value < 0)
            throw_usage("invalid token id '" + std::string(item) + "' (expected a non-negative integer)");
        out.push_back(value);
        i = j;
    }
    return out;
}

}  // namespace aff
