// Prometheus text rendering of the server's counters (see metrics.hpp).
#include "libaff/serve/metrics.hpp"

#include <cstdio>
#include <vector>

namespace aff::serve {
namespace {

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

// One line of a metric: `labels` empty or `{k="v",...}`.
struct Sample {
    std::string labels, value;
};

// One metric: its HELP and TYPE lines, then a line a sample; every metric is written by it,
// so a name is spelt once.
void metric(std::string& out, const char* name, const char* type, const char* help,
            const std::vector<Sample>& samples) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const Sample& s : samples) out += name + s.labels + " " + s.value + "\n";
}
// A metric without labels: one sample.
void metric(std::string& out, const char* name, const char* type, const char* help, const std::string& value) {
    metric(out, name, type, help, std::vector<Sample>{{"", value}});
}

// A histogram's lines: _bucket per bound and +Inf (cumulative), _sum, _count.
void histogram(std::string& out, const char* name, const char* help, const LatencyHistogram& h) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        const std::string le = i < h.bounds.size() ? number(h.bounds[i]) : "+Inf";
        out += std::string(name) + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += std::string(name) + "_sum " + number(h.sum) + "\n";
    out += std::string(name) + "_count " + std::to_string(h.count) + "\n";
}

}  // namespace

LatencyHistogram::LatencyHistogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void LatencyHistogram::observe(double seconds) {
    std::size_t i = 0;
    while (i < bounds.size() && seconds > bounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++count;
}

// Buckets: time to first token spans a cached short prompt (tens of ms) to a long
// prefill behind a queue (minutes); a token interval spans a fast GPU step (~10 ms) to
// the CPU reference path (seconds).
Metrics::Metrics()
    : first_token_({0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      token_interval_({0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5}) {}

void Metrics::observe_first_token(double seconds) {
    std::lock_guard lock(mutex_);
    first_token_.observe(seconds);
}

void Metrics::observe_token_interval(double seconds) {
    std::lock_guard lock(mutex_);
    token_interval_.observe(seconds);
}

void Metrics::count_request(const std::string& path, int status) {
    // Unknown paths share one label so a scanner cannot grow the table without bound.
    const bool known = path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/models" ||
                       path == "/health" || path == "/metrics" || path == "/tokenize" || path == "/detokenize" ||
                       path == "/apply-template" || path == "/props" || path.rfind("/v1/models/", 0) == 0;
    std::lock_guard lock(mutex_);
    ++requests_[{known ? (path.rfind("/v1/models/", 0) == 0 ? std::string("/v1/models/{id}") : path) : "other", status}];
}

void Metrics::add_generation(std::size_t prompt_tokens, std::size_t cached_tokens, double prompt_seconds,
                             std::size_t generated_tokens, double decode_seconds) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += prompt_tokens;
    cached_tokens_ += cached_tokens;
    generated_tokens_ += generated_tokens;
    prompt_seconds_ += prompt_seconds;
    decode_seconds_ += decode_seconds;
}

void Metrics::add_drafts(std::size_t verify_calls, const std::vector<std::size_t>& drafted_at,
                         const std::vector<std::size_t>& accepted_at) {
    std::lock_guard lock(mutex_);
    drafting_ = true;
    verify_calls_ += verify_calls;
    if (drafted_at_.size() < drafted_at.size()) {
        drafted_at_.resize(drafted_at.size(), 0);
        accepted_at_.resize(drafted_at.size(), 0);
    }
    for (std::size_t i = 0; i < drafted_at.size(); ++i) drafted_at_[i] += drafted_at[i];
    for (std::size_t i = 0; i < accepted_at.size() && i < accepted_at_.size(); ++i) accepted_at_[i] += accepted_at[i];
}

namespace {

// The expert tiers' lines: counters, and the ratios a user asks for first (per tier, per
// token) as gauges over the whole run, so that they read without a query language.
void tier_lines(std::string& out, const TierStats& t) {
    using std::to_string;
    auto per = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    auto by_tier = [](const std::string& gpu, const std::string& host, const std::string& ssd) {
        return std::vector<Sample>{{"{tier=\"gpu\"}", gpu}, {"{tier=\"host\"}", host}, {"{tier=\"ssd\"}", ssd}};
    };
    const double reads = double(t.expert_reads), tokens = double(t.tokens);
    metric(out, "aff_tier_tokens_total", "counter", "Tokens of the forward calls the expert tiers' mover saw.",
           to_string(t.tokens));
    metric(out, "aff_tier_reads_total", "counter",
           "Routed-expert reads (distinct experts a layer of a call) by the tier that served them (ssd: read from the "
           "container).",
           by_tier(to_string(t.gpu_hits), to_string(t.host_hits), to_string(t.ssd_reads)));
    metric(out, "aff_tier_hit_ratio", "gauge", "Share of the routed-expert reads each tier served.",
           by_tier(number(per(double(t.gpu_hits), reads)), number(per(double(t.host_hits), reads)),
                   number(per(double(t.ssd_reads), reads))));
    metric(out, "aff_tier_experts", "gauge", "Routed experts placed in each tier now.",
           by_tier(to_string(t.gpu_experts), to_string(t.host_experts), to_string(t.ssd_experts)));
    metric(out, "aff_tier_pcie_bytes_total", "counter", "Bytes over the bus for the tiers: host-pool reads and the mover's copies.",
           to_string(t.pcie_bytes));
    metric(out, "aff_tier_pcie_bytes_per_token", "gauge", "aff_tier_pcie_bytes_total over aff_tier_tokens_total.",
           number(per(double(t.pcie_bytes), tokens)));
    metric(out, "aff_tier_ssd_bytes_total", "counter", "Bytes of routed experts read from the SSD.", to_string(t.ssd_bytes));
    metric(out, "aff_tier_moves_total", "counter", "Experts the mover promoted into the GPU slab (each demotes one when it is full).",
           to_string(t.moves));
    metric(out, "aff_tier_moves_per_token", "gauge", "aff_tier_moves_total over aff_tier_tokens_total.",
           number(per(double(t.moves), tokens)));
    metric(out, "aff_tier_moved_bytes_total", "counter", "Bytes the mover copied between the tiers.", to_string(t.moved_bytes));
    metric(out, "aff_tier_mover_stall_seconds_total", "counter",
           "Seconds the GPU waited for the mover's copies before a forward call could start.", number(t.stall_seconds));
    metric(out, "aff_tier_mover_stalled_calls_total", "counter", "Forward calls that waited for the mover's copies.",
           to_string(t.stalled_calls));
    metric(out, "aff_tier_prefetched_total", "counter",
           "Pooled experts the decode prefetch copied into GPU memory during attention (--expert-prefetch).",
           to_string(t.prefetched));
    metric(out, "aff_tier_prefetch_hit_ratio", "gauge", "Share of the prefetched experts the router then chose.",
           number(per(double(t.prefetch_hits), double(t.prefetched))));
}

}  // namespace

std::string Metrics::render(std::size_t waiting, bool busy, bool ready, const std::optional<PrefixCacheStats>& cache,
                            const std::optional<TierStats>& tiers) const {
    std::string out;
    std::lock_guard lock(mutex_);
    std::vector<Sample> requests;
    std::uint64_t errors = 0;
    for (const auto& [key, n] : requests_) {
        requests.push_back({"{path=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"}",
                            std::to_string(n)});
        if (key.second >= 400) errors += n;
    }
    using std::to_string;
    metric(out, "aff_requests_total", "counter", "HTTP requests answered, by path and status.", requests);
    metric(out, "aff_request_errors_total", "counter", "HTTP requests answered with a status of 400 or more.",
           to_string(errors));
    metric(out, "aff_prompt_tokens_total", "counter", "Prompt tokens, computed or taken from the prefix cache.",
           to_string(prompt_tokens_));
    metric(out, "aff_prompt_cached_tokens_total", "counter", "Prompt tokens taken from the prefix cache.",
           to_string(cached_tokens_));
    metric(out, "aff_prompt_seconds_total", "counter", "Seconds spent in prefill.", number(prompt_seconds_));
    metric(out, "aff_generated_tokens_total", "counter", "Tokens generated.", to_string(generated_tokens_));
    metric(out, "aff_generation_seconds_total", "counter", "Seconds spent sampling and decoding.",
           number(decode_seconds_));
    metric(out, "aff_generations_cancelled_total", "counter", "Generations stopped because the client left.",
           to_string(cancelled_.load()));
    metric(out, "aff_queue_rejections_total", "counter", "Requests refused with 503 because the queue was full.",
           to_string(rejected_full_.load()));
    metric(out, "aff_queue_length", "gauge", "Requests waiting for the engine.", to_string(waiting));
    metric(out, "aff_generation_active", "gauge", "1 while a generation runs.", busy ? "1" : "0");
    metric(out, "aff_ready", "gauge", "1 once the model is loaded.", ready ? "1" : "0");
    histogram(out, "aff_time_to_first_token_seconds",
              "Seconds from a generation request's arrival (queueing included) to its first output token.",
              first_token_);
    histogram(out, "aff_time_per_output_token_seconds", "Seconds between consecutive output tokens of a generation.",
              token_interval_);
    if (cache) {
        metric(out, "aff_prefix_cache_capacity_bytes", "gauge", "Memory the prefix cache may hold (--prefix-cache-mib).",
               to_string(cache->capacity_bytes));
        metric(out, "aff_prefix_cache_bytes", "gauge", "Memory the prefix cache holds.", to_string(cache->bytes));
        metric(out, "aff_prefix_cache_entries", "gauge", "Snapshots the prefix cache holds.",
               to_string(cache->entries));
        metric(out, "aff_prefix_cache_lookups_total", "counter", "Prompts looked up in the prefix cache.",
               to_string(cache->lookups));
        metric(out, "aff_prefix_cache_hits_total", "counter", "Lookups that restored a cached prefix.",
               to_string(cache->hits));
        metric(out, "aff_prefix_cache_evictions_total", "counter", "Snapshots dropped to stay within the budget.",
               to_string(cache->evictions));
    }
    if (tiers) tier_lines(out, *tiers);
    if (!drafting_) return out;
    std::uint64_t drafted = 0, accepted = 0;
    std::vector<Sample> drafted_by, accepted_by;
    for (std::size_t i = 0; i < drafted_at_.size(); ++i) {
        drafted += drafted_at_[i];
        accepted += accepted_at_[i];
        const std::string label = "{position=\"" + to_string(i) + "\"}";
        drafted_by.push_back({label, to_string(drafted_at_[i])});
        accepted_by.push_back({label, to_string(accepted_at_[i])});
    }
    metric(out, "aff_draft_verify_calls_total", "counter", "Forward calls that verified draft tokens.",
           to_string(verify_calls_));
    metric(out, "aff_draft_tokens_total", "counter", "Draft tokens proposed and verified.", to_string(drafted));
    metric(out, "aff_draft_accepted_tokens_total", "counter", "Draft tokens the model accepted.", to_string(accepted));
    if (!drafted_by.empty()) {
        metric(out, "aff_draft_position_tokens_total", "counter",
               "Verify calls that drafted a token at this position (0: the first after the verified token).",
               drafted_by);
        metric(out, "aff_draft_position_accepted_total", "counter",
               "Verify calls that accepted the draft at this position and every one before it.", accepted_by);
    }
    return out;
}

}  // namespace aff::serve
