// Prometheus text rendering of the server's counters (see metrics.hpp).
#include "aff/serve/metrics.hpp"

#include <cstdio>

namespace aff::serve {
namespace {

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
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
    header(out, "aff_requests_total", "counter", "HTTP requests answered, by path and status.");
    std::uint64_t errors = 0;
    for (const auto& [key, n] : requests_) {
        out += "aff_requests_total{path=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
               std::to_string(n) + "\n";
        if (key.second >= 400) errors += n;
    }
    header(out, "aff_request_errors_total", "counter", "HTTP requests answered with a status of 400 or more.");
    out += "aff_request_errors_total " + std::to_string(errors) + "\n";
    header(out, "aff_prompt_tokens_total", "counter", "Prompt tokens, computed or taken from the prefix cache.");
    out += "aff_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
    header(out, "aff_prompt_cached_tokens_total", "counter", "Prompt tokens taken from the prefix cache.");
    out += "aff_prompt_cached_tokens_total " + std::to_string(cached_tokens_) + "\n";
    header(out, "aff_prompt_seconds_total", "counter", "Seconds spent in prefill.");
    out += "aff_prompt_seconds_total " + number(prompt_seconds_) + "\n";
    header(out, "aff_generated_tokens_total", "counter", "Tokens generated.");
    out += "aff_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
    header(out, "aff_generation_seconds_total", "counter", "Seconds spent sampling and decoding.");
    out += "aff_generation_seconds_total " + number(decode_seconds_) + "\n";
    header(out, "aff_generations_cancelled_total", "counter", "Generations stopped because the client left.");
    out += "aff_generations_cancelled_total " + std::to_string(cancelled_.load()) + "\n";
    header(out, "aff_queue_rejections_total", "counter", "Requests refused with 503 because the queue was full.");
    out += "aff_queue_rejections_total " + std::to_string(rejected_full_.load()) + "\n";
    header(out, "aff_queue_length", "gauge", "Requests waiting for the engine.");
    out += "aff_queue_length " + std::to_string(waiting) + "\n";
    header(out, "aff_generation_active", "gauge", "1 while a generation runs.");
    out += std::string("aff_generation_active ") + (busy ? "1" : "0") + "\n";
    header(out, "aff_ready", "gauge", "1 once the model is loaded.");
    out += std::string("aff_ready ") + (ready ? "1" : "0") + "\n";
    if (cache) {
        header(out, "aff_prefix_cache_capacity_bytes", "gauge", "Memory the prefix cache may hold (--prefix-cache-mib).");
        out += "aff_prefix_cache_capacity_bytes " + std::to_string(cache->capacity_bytes) + "\n";
        header(out, "aff_prefix_cache_bytes", "gauge", "Memory the prefix cache holds.");
        out += "aff_prefix_cache_bytes " + std::to_string(cache->bytes) + "\n";
        header(out, "aff_prefix_cache_entries", "gauge", "Snapshots the prefix cache holds.");
        out += "aff_prefix_cache_entries " + std::to_string(cache->entries) + "\n";
        header(out, "aff_prefix_cache_lookups_total", "counter", "Prompts looked up in the prefix cache.");
        out += "aff_prefix_cache_lookups_total " + std::to_string(cache->lookups) + "\n";
        header(out, "aff_prefix_cache_hits_total", "counter", "Lookups that restored a cached prefix.");
        out += "aff_prefix_cache_hits_total " + std::to_string(cache->hits) + "\n";
        header(out, "aff_prefix_cache_evictions_total", "counter", "Snapshots dropped to stay within the budget.");
        out += "aff_prefix_cache_evictions_total " + std::to_string(cache->evictions) + "\n";
    }
    return out;
}

}  // namespace aff::serve
