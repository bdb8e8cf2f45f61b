// aff-verify's three checks (formats/container.md §7 and §10):
//   check_sha256sums  a SHA256SUMS file, like `sha256sum -c`, hashing files in parallel;
//   verify_container  a container's structure (on open) and every tensor digest;
//   verify_parts      the parts of a split, as their concatenation, without writing it:
//                     the part set is complete, each part and the whole match the
//                     SHA256SUMS beside them, and when the whole is a container, its
//                     structure and tensor digests check (parts mapped end to end).
// Each returns a report; ok() is the exit status. Text and JSON renderings are here so
// the tool stays thin.
#pragma once

#include "libaff/container/digests.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace aff {

struct FileCheck {
    enum class Status { ok, mismatch, missing, unreadable, skipped };
    std::string name;  // as written in SHA256SUMS
    std::string path;  // where it was looked for
    Status status = Status::ok;
    std::string detail;  // the error for unreadable
    std::uint64_t bytes = 0;
};
std::string_view to_string(FileCheck::Status s);

struct SumsOptions {
    bool ignore_missing = false;
    std::size_t threads = 0;  // 0: one per hardware thread
};

struct SumsReport {
    std::string sums_path;
    std::vector<FileCheck> files;  // SHA256SUMS order
    std::uint64_t bytes = 0;
    double seconds = 0;
    bool ok() const;
};

// Names are resolved relative to the directory holding the SHA256SUMS file.
SumsReport check_sha256sums(const std::string& sums_path, const SumsOptions& options, Progress& progress);

struct ContainerReport {
    std::string path;
    TensorDigestReport digests;
    double seconds = 0;
    bool ok() const { return digests.ok(); }
};

// Opening validates the structure and throws on a defect; digest mismatches are in
// the report (all of them, the first named by verify_tensor_digests' message).
ContainerReport verify_container(const std::string& path, std::size_t threads, Progress& progress);

struct PartsOptions {
    std::string sums_path;  // empty: SHA256SUMS beside the parts, when present
    std::size_t threads = 0;
};

struct PartsReport {
    std::string base;                  // the whole file's name
    std::vector<std::string> parts;    // paths, in order
    std::uint64_t size = 0;            // of the concatenation
    std::string sums_path;             // empty when none was used
    std::vector<FileCheck> sums;       // parts then the whole; only names SHA256SUMS lists
    bool is_container = false;
    bool container_checked = false;
    std::string container_note;        // why the container inside was not checked
    TensorDigestReport digests;
    double seconds = 0;
    bool ok() const;
};

PartsReport verify_parts(const std::string& any_part, const PartsOptions& options, Progress& progress);

// One line per file as sha256sum -c prints them ("name: OK", "name: FAILED",
// "name: FAILED open or read"), missing files skipped when ignored.
void write_text(std::ostream& out, const SumsReport& r);
void write_text(std::ostream& out, const ContainerReport& r);
void write_text(std::ostream& out, const PartsReport& r);
nlohmann::json to_json(const SumsReport& r);
nlohmann::json to_json(const ContainerReport& r);
nlohmann::json to_json(const PartsReport& r);

// The one-line reason a report is not ok (for stderr); empty when ok.
std::string failure_summary(const SumsReport& r);
std::string failure_summary(const ContainerReport& r);
std::string failure_summary(const PartsReport& r);

}  // namespace aff
