// Counters the server exposes at /metrics in the Prometheus text format (version
// 0.0.4): requests by endpoint and status, tokens and seconds of prefill and decode,
// queue length, errors, the prefix cache. Updated with relaxed atomics from the connection threads.
#pragma once

#include "libaff/serve/prefix_cache.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace aff::serve {

class Metrics {
public:
    void count_request(const std::string& path, int status);
    // prompt_tokens includes cached_tokens (those the prefix cache supplied).
    void add_generation(std::size_t prompt_tokens, std::size_t cached_tokens, double prompt_seconds,
                        std::size_t generated_tokens, double decode_seconds);
    void count_cancelled() { cancelled_.fetch_add(1, std::memory_order_relaxed); }
    void count_rejected_full() { rejected_full_.fetch_add(1, std::memory_order_relaxed); }

    // `waiting` and `busy` are read from the scheduler at scrape time, `cache` from the
    // engine (nothing: no prefix cache, and its lines are left out).
    std::string render(std::size_t waiting, bool busy, bool ready,
                       const std::optional<PrefixCacheStats>& cache = std::nullopt) const;

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, std::uint64_t> requests_;
    std::uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
    double prompt_seconds_ = 0, decode_seconds_ = 0;
    std::atomic<std::uint64_t> cancelled_{0}, rejected_full_{0};
};

}  // namespace aff::serve
