// SHA-256 of the files a container was made from, for its provenance metadata
// (formats/container.md §5: sources [{file, sha256}], imatrix {file, sha256}). Files
// are hashed in parallel, one file a task; names are recorded without their directory
// so that the same inputs give the same bytes wherever they lie.
#pragma once

#include "aff/core/progress.hpp"
#include "aff/core/thread_pool.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace aff::quant {

// One {"file": <file name>, "sha256": <64 hex digits>} per path, in the given order.
// Reports bytes hashed to `progress` (stage "hashing sources").
nlohmann::json hash_sources(const std::vector<std::string>& paths, ThreadPool& pool, Progress& progress);

}  // namespace aff::quant
