// Splitting a large file into byte-exact parts "FILE.part-00001-of-0000N" that
// `cat FILE.part-* > FILE` reassembles, with a SHA256SUMS for the parts and the whole
// file (formats/container.md §10). The input is read once: each block feeds the
// whole-file hash, the current part's hash and the part's file, on two threads.
// Every part stays a temporary until all are complete; then all are renamed and the
// sums file last, so a failed or interrupted split leaves nothing under a final name
// (killed outright between two renames: an incomplete set that no reader takes whole).
#pragma once

#include "libaff/core/hash.hpp"
#include "libaff/core/progress.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace aff {

constexpr std::uint64_t kDefaultPartSize = 48ull << 30;  // under the Hub's 50 GB limit
constexpr std::uint32_t kMaxParts = 99999;               // five digits in the names

struct SplitOptions {
    std::uint64_t max_size = kDefaultPartSize;
    std::string output_dir;                 // empty: the input's directory
    std::string sums_name = "SHA256SUMS";   // in output_dir; lines for other files are kept
    bool dry_run = false;                   // plan only: read and write nothing
};

struct PartInfo {
    std::string name;  // file name, no directory
    std::string path;
    std::uint64_t offset = 0, size = 0;
    Sha256Digest digest{};
};

struct SplitResult {
    std::string input;
    std::string name;       // the whole file's name, the stem of the parts' names
    std::string listed_as;  // the whole file in SHA256SUMS: relative to the sums file's folder
    std::uint64_t size = 0;
    Sha256Digest digest{};
    std::vector<PartInfo> parts;
    std::string sums_path;
    std::uint64_t bytes_read = 0;  // counted at read(): equals size when read once
    bool dry_run = false;
};

SplitResult split_file(const std::string& input, const SplitOptions& options, Progress& progress);

// stdout of aff-split: one "name<TAB>size<TAB>sha256" line a part (no digest in a dry
// run), or one JSON object; and the one-line summary for stderr.
void write_text(std::ostream& out, const SplitResult& r);
nlohmann::json to_json(const SplitResult& r);
std::string summary_line(const SplitResult& r);

// "model.aff.part-00002-of-00004".
std::string part_name(std::string_view base, std::uint32_t index, std::uint32_t count);
struct PartName {
    std::string base;
    std::uint32_t index = 0, count = 0;
};
std::optional<PartName> parse_part_name(std::string_view file_name);

// Every part of the set `any_part` belongs to, in order. Throws aff::Error naming a
// missing part, or an extra one (another index or count beside them).
std::vector<std::string> find_parts(const std::string& any_part);

}  // namespace aff
