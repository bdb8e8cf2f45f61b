// UTF-8 helpers the tokenizer needs: validation, the "lossy" repair that replaces each
// maximal ill-formed subpart with U+FFFD (Unicode §3.9, the same rule as Python's
// errors="replace" and Rust's String::from_utf8_lossy, which Hugging Face's decoder uses),
// and the incremental form of that repair that StreamDecoder builds on.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aff::tokenizer {

inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD

bool utf8_valid(std::string_view bytes);

// Appends `bytes` to `out` with every maximal ill-formed subpart replaced by U+FFFD.
void utf8_append_lossy(std::string_view bytes, std::string& out);
std::string utf8_lossy(std::string_view bytes);

// Incremental repair: appends the repaired form of as much of `bytes` as can be decided
// now to `out` and returns how many bytes were consumed. When `final` is false a trailing
// sequence that is a valid but incomplete prefix of a character is left unconsumed (more
// bytes may complete it); when `final` is true everything is consumed. Feeding a byte
// string in any number of pieces gives the same output as utf8_lossy on the whole.
std::size_t utf8_repair_prefix(std::string_view bytes, bool final, std::string& out);

}  // namespace aff::tokenizer
