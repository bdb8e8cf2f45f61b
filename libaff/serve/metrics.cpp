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

}  // namespace

void Metrics::count_request(const std::string& path, int status) {
    // Unknown paths share one label so a scanner cannot grow the table without bound.
    const bool known = path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/models" ||
                       path == "/health" || path == "/metrics" || path.rfind("/v1/models/", 0) == 0;
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

std::string Metrics::render(std::size_t waiting, bool busy, bool ready,
                            const std::optional<PrefixCacheStats>& cache) const {
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
    return out;
}

}  // namespace aff::serve
