// Parallel per-tensor digest check. Tensors are handed out one at a time from an
// atomic counter because their sizes differ by six orders of magnitude (a norm vs the
// embedding); results land in per-tensor slots so the report's order is the
// directory's whatever the scheduling.
#include "libaff/container/digests.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/hash.hpp"

#include <atomic>
#include <mutex>

namespace aff {

TensorDigestReport check_tensor_digests(const Container& c, ThreadPool& pool, Progress& progress) {
    const auto& tensors = c.tensors();
    TensorDigestReport report;
    for (const TensorInfo& t : tensors) report.bytes += t.length;
    report.tensors = tensors.size();
    std::vector<std::uint64_t> actual(tensors.size());
    std::atomic<std::size_t> next{0};
    std::mutex progress_mutex;
    progress.begin("checking tensor digests", report.bytes, "B");
    pool.parallel_for(pool.size(), [&](std::size_t, std::size_t) {
        for (std::size_t i; (i = next.fetch_add(1)) < tensors.size();) {
            const TensorInfo& t = tensors[i];
            // Large tensors are hashed in slices so progress moves smoothly.
            constexpr std::size_t kSlice = 64u << 20;
            const auto bytes = c.bytes(t);
            if (bytes.size() <= kSlice) {
                actual[i] = xxh3_64(bytes.data(), bytes.size());
                std::lock_guard<std::mutex> lock(progress_mutex);
                progress.advance(bytes.size());
            } else {
                Xxh3Stream h;
                for (std::size_t off = 0; off < bytes.size(); off += kSlice) {
                    const std::size_t n = std::min(kSlice, bytes.size() - off);
                    h.update(bytes.data() + off, n);
                    std::lock_guard<std::mutex> lock(progress_mutex);
                    progress.advance(n);
                }
                actual[i] = h.digest();
            }
        }
    });
    progress.end();
    for (std::size_t i = 0; i < tensors.size(); ++i)
        if (actual[i] != tensors[i].digest) report.mismatches.push_back({tensors[i].name, tensors[i].digest, actual[i]});
    return report;
}

void verify_tensor_digests(const Container& c, ThreadPool& pool, Progress& progress) {
    const TensorDigestReport r = check_tensor_digests(c, pool, progress);
    if (!r.ok()) {
        const DigestMismatch& m = r.mismatches.front();
        std::string more = r.mismatches.size() > 1 ? "; " + std::to_string(r.mismatches.size() - 1) + " more bad tensors" : "";
        throw_format("tensor " + m.tensor + ": digest mismatch (directory " + to_hex(m.expected) + ", bytes " +
                         to_hex(m.actual) + ")" + more,
                     c.path());
    }
}

}  // namespace aff
