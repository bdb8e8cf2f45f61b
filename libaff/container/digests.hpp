// Checks a container's per-tensor XXH3-64 digests (formats/container.md §7), hashing
// tensors on a ThreadPool. The reader never hashes on open; this is the "on request"
// half (aff-verify; the tools that load a container check structure only).
#pragma once

#include "libaff/container/container.hpp"
#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace aff {

struct DigestMismatch {
    std::string tensor;
    std::uint64_t expected = 0, actual = 0;
};

struct TensorDigestReport {
    std::uint64_t tensors = 0, bytes = 0;
    std::vector<DigestMismatch> mismatches;  // directory order
    bool ok() const { return mismatches.empty(); }
};

// Hashes every tensor; reports all mismatches in directory order. Progress in bytes.
TensorDigestReport check_tensor_digests(const Container& c, ThreadPool& pool, Progress& progress);

// Same, but throws aff::Error "<path>: tensor <name>: digest mismatch (...)" naming the
// first bad tensor in directory order.
void verify_tensor_digests(const Container& c, ThreadPool& pool, Progress& progress);

}  // namespace aff
