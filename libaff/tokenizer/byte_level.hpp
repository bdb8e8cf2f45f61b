// The GPT-2 "byte-level" alphabet used by Hugging Face's ByteLevel pre-tokenizer and
// decoder: each of the 256 byte values is shown as one printable code point (printable
// Latin-1 bytes as themselves, the rest as U+0100 onwards in byte order). Vocabulary
// strings in tokenizer.json are written in this alphabet; libaff converts them to raw
// bytes once at load so that encoding never builds byte-level strings.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aff::tokenizer {

// Code point that stands for byte b.
char32_t byte_to_char(std::uint8_t b);

// The byte a byte-level code point stands for, or nullopt if it is not one of the 256.
std::optional<std::uint8_t> char_to_byte(char32_t c);

// Raw bytes of a byte-level string, or nullopt if it holds a code point outside the
// alphabet (or is not valid UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view text);

// The byte-level string for raw bytes (inverse of byte_level_to_bytes).
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace aff::tokenizer
