// Token ids as people type them on a command line: "0, 17 42" or "0,17,42".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace aff {

// Separators are commas and whitespace. Throws aff::Error (usage) naming the first
// item that is not a non-negative 32-bit integer.
std::vector<std::int32_t> parse_token_list(std::string_view text);

}  // namespace aff
