// What aff-run checks about a prompt before it spends time on it: the prompt file is a
// readable regular file, the text cannot be too long for the context (decided from its
// byte length before tokenising, since a token covers at most the longest vocabulary
// entry's bytes).
#pragma once

#include "libaff/tokenizer/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff {

// Throws aff::Error naming `path` when it is missing, unreadable or a directory (cheap:
// tools call it before loading a model).
void check_prompt_file(const std::string& path);

// Reads a prompt file; throws aff::Error (io/usage) naming it for a directory, a missing
// or unreadable file, or one longer than max_bytes (checked before reading it all).
std::string read_prompt_file(const std::string& path, std::uint64_t max_bytes);

// The most bytes a text of `context` tokens can hold: context x the longest token.
std::uint64_t max_prompt_bytes(const tokenizer::Tokenizer& tok, std::size_t context);

// Throws aff::Error (usage) when `text_bytes` exceed max_prompt_bytes.
void check_prompt_bytes(std::uint64_t text_bytes, std::uint64_t max_bytes, std::size_t context);

}  // namespace aff
