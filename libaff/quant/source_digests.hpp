// SHA-256 of the files a container was made from, for its provenance metadata
// (formats/container.md §5: sources [{file, sha256}], imatrix {file, sha256}). Files
// are hashed in parallel, one file a task; names are recorded without their directory
// so that the same inputs give the same bytes wherever they lie. BackgroundHashes does
// the same while its caller works.
#pragma once

#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace aff::quant {

// One {"file": <file name>, "sha256": <64 hex digits>} per path, in the given order.
// Reports bytes hashed to `progress` (stage "hashing sources").
nlohmann::json hash_sources(const std::vector<std::string>& paths, ThreadPool& pool, Progress& progress);

// hash_sources on `threads` threads of its own, begun at construction, for a caller with
// other work meanwhile (aff-quantize hashes its sources while it quantises). Reports no
// progress. Destroying it before get() stops the hashing at its next read.
class BackgroundHashes {
public:
    BackgroundHashes(std::vector<std::string> paths, std::size_t threads);
    ~BackgroundHashes();
    BackgroundHashes(const BackgroundHashes&) = delete;
    BackgroundHashes& operator=(const BackgroundHashes&) = delete;
    // Waits; hash_sources' array, or its error. Once.
    nlohmann::json get();

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace aff::quant
