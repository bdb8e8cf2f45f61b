// SHA256SUMS files in the format `sha256sum` writes and `sha256sum -c` reads: one
// "<64 hex digits>  <name>" line per file ("<hex> *<name>" in binary mode; a name
// holding a backslash or newline is escaped and the line starts with '\'). aff-split
// writes them for Hub uploads; aff-verify -c checks them.
#pragma once

#include "libaff/core/hash.hpp"
#include "libaff/core/progress.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace aff {

struct ChecksumLine {
    Sha256Digest digest{};
    std::string name;
};

// Throws aff::Error (format) "<path>: line N: <why>" on the first malformed line.
// Blank lines are refused too: sha256sum never writes them.
std::vector<ChecksumLine> parse_sha256sums(std::string_view text, const std::string& path);
std::vector<ChecksumLine> read_sha256sums(const std::string& path);

// One line, "\n"-terminated, escaped the way sha256sum escapes.
std::string format_sha256sums_line(const ChecksumLine& line);

// Streams a file through SHA-256 (large reads, never the whole file in memory);
// progress.advance() is called with the bytes read. Throws aff::Error (io) naming it.
Sha256Digest sha256_file(const std::string& path, Progress& progress);

}  // namespace aff
