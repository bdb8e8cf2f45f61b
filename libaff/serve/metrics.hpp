// Counters the server exposes at /metrics in the Prometheus text format (version
// 0.0.4): requests by endpoint and status, tokens and seconds of prefill and decode,
// speculative decoding's drafted and accepted tokens (in total and by draft position, once a
// generation drafted),
// queue length, errors, the prefix cache, the expert tiers (aff_tier_*: hit rate per tier,
// PCIe bytes, SSD reads, moves and mover stalls, in total and a token), and two latency histograms: time to first
// token (from a request's arrival, queueing included) and the time between output
// tokens. Updated from the connection threads under one mutex (relaxed atomics for
// the plain counts).
#pragma once

#include "libaff/runtime/tier_stats.hpp"
#include "libaff/serve/prefix_cache.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace aff::serve {

// A Prometheus histogram: cumulative counts at fixed upper bounds (seconds), sum and count.
struct LatencyHistogram {
    explicit LatencyHistogram(std::vector<double> upper_bounds);
    void observe(double seconds);
    std::vector<double> bounds;
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative; one more for +Inf
    double sum = 0;
    std::uint64_t count = 0;
};

class Metrics {
public:
    Metrics();
    void count_request(const std::string& path, int status);
    // prompt_tokens includes cached_tokens (those the prefix cache supplied).
    void add_generation(std::size_t prompt_tokens, std::size_t cached_tokens, double prompt_seconds,
                        std::size_t generated_tokens, double decode_seconds);
    // A generation's speculative decoding: its verify calls, and per draft position how many
    // verify calls drafted it and how many accepted it (GenerateStats::drafted_at/accepted_at).
    void add_drafts(std::size_t verify_calls, const std::vector<std::size_t>& drafted_at,
                    const std::vector<std::size_t>& accepted_at);
    void count_cancelled() { cancelled_.fetch_add(1, std::memory_order_relaxed); }
    void count_rejected_full() { rejected_full_.fetch_add(1, std::memory_order_relaxed); }
    void observe_first_token(double seconds);
    void observe_token_interval(double seconds);

    // `waiting` and `busy` are read from the scheduler at scrape time, `cache` and `tiers`
    // from the engine (nothing: no prefix cache, or experts not tiered, and their lines are
    // left out).
    std::string render(std::size_t waiting, bool busy, bool ready,
                       const std::optional<PrefixCacheStats>& cache = std::nullopt,
                       const std::optional<TierStats>& tiers = std::nullopt) const;

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, std::uint64_t> requests_;
    std::uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
    double prompt_seconds_ = 0, decode_seconds_ = 0;
    bool drafting_ = false;  // a generation drafted: the draft lines are rendered
    std::uint64_t verify_calls_ = 0;
    std::vector<std::uint64_t> drafted_at_, accepted_at_;
    LatencyHistogram first_token_;
    LatencyHistogram token_interval_;
    std::atomic<std::uint64_t> cancelled_{0}, rejected_full_{0};
};

}  // namespace aff::serve
