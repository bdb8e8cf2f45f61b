// Tests for libaff/serve/metrics: the exact Prometheus text /metrics answers (scrapers
// and the CLI tests read it line by line), unknown paths folded into one label, the
// latency histograms' cumulative buckets, and the prefix-cache lines present only when
// there is a cache.
#include "libaff/serve/metrics.hpp"

#include <catch2/catch.hpp>

#include <string>

using aff::serve::Metrics;
using aff::serve::PrefixCacheStats;

namespace {

const char* const kPlain =
    "# HELP aff_requests_total HTTP requests answered, by path and status.\n"
    "# TYPE aff_requests_total counter\n"
    "aff_requests_total{path=\"/health\",status=\"200\"} 2\n"
    "aff_requests_total{path=\"/v1/models/{id}\",status=\"404\"} 1\n"
    "aff_requests_total{path=\"other\",status=\"404\"} 2\n"
    "# HELP aff_request_errors_total HTTP requests answered with a status of 400 or more.\n"
    "# TYPE aff_request_errors_total counter\n"
    "aff_request_errors_total 3\n"
    "# HELP aff_prompt_tokens_total Prompt tokens, computed or taken from the prefix cache.\n"
    "# TYPE aff_prompt_tokens_total counter\n"
    "aff_prompt_tokens_total 17\n"
    "# HELP aff_prompt_cached_tokens_total Prompt tokens taken from the prefix cache.\n"
    "# TYPE aff_prompt_cached_tokens_total counter\n"
    "aff_prompt_cached_tokens_total 5\n"
    "# HELP aff_prompt_seconds_total Seconds spent in prefill.\n"
    "# TYPE aff_prompt_seconds_total counter\n"
    "aff_prompt_seconds_total 0.375\n"
    "# HELP aff_generated_tokens_total Tokens generated.\n"
    "# TYPE aff_generated_tokens_total counter\n"
    "aff_generated_tokens_total 9\n"
    "# HELP aff_generation_seconds_total Seconds spent sampling and decoding.\n"
    "# TYPE aff_generation_seconds_total counter\n"
    "aff_generation_seconds_total 1.125\n"
    "# HELP aff_generations_cancelled_total Generations stopped because the client left.\n"
    "# TYPE aff_generations_cancelled_total counter\n"
    "aff_generations_cancelled_total 1\n"
    "# HELP aff_queue_rejections_total Requests refused with 503 because the queue was full.\n"
    "# TYPE aff_queue_rejections_total counter\n"
    "aff_queue_rejections_total 2\n"
    "# HELP aff_queue_length Requests waiting for the engine.\n"
    "# TYPE aff_queue_length gauge\n"
    "aff_queue_length 4\n"
    "# HELP aff_generation_active 1 while a generation runs.\n"
    "# TYPE aff_generation_active gauge\n"
    "aff_generation_active 1\n"
    "# HELP aff_ready 1 once the model is loaded.\n"
    "# TYPE aff_ready gauge\n"
    "aff_ready 0\n"
    "# HELP aff_time_to_first_token_seconds Seconds from a generation request's arrival (queueing included) to its first output token.\n"
    "# TYPE aff_time_to_first_token_seconds histogram\n"
    "aff_time_to_first_token_seconds_bucket{le=\"0.025\"} 0\n"
    "aff_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"
    "aff_time_to_first_token_seconds_bucket{le=\"0.1\"} 1\n"
    "aff_time_to_first_token_seconds_bucket{le=\"0.25\"} 1\n"
    "aff_time_to_first_token_seconds_bucket{le=\"0.5\"} 1\n"
    "aff_time_to_first_token_seconds_bucket{le=\"1\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"2.5\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"5\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"10\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"30\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"60\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"120\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"300\"} 2\n"
    "aff_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"
    "aff_time_to_first_token_seconds_sum 0.73\n"
    "aff_time_to_first_token_seconds_count 2\n"
    "# HELP aff_time_per_output_token_seconds Seconds between consecutive output tokens of a generation.\n"
    "# TYPE aff_time_per_output_token_seconds histogram\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.005\"} 0\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.01\"} 0\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.02\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.04\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.06\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.08\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.1\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.15\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.2\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.3\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"0.5\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"1\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"2.5\"} 2\n"
    "aff_time_per_output_token_seconds_bucket{le=\"5\"} 3\n"
    "aff_time_per_output_token_seconds_bucket{le=\"+Inf\"} 3\n"
    "aff_time_per_output_token_seconds_sum 3.024\n"
    "aff_time_per_output_token_seconds_count 3\n";

const char* const kCache =
    "# HELP aff_prefix_cache_capacity_bytes Memory the prefix cache may hold (--prefix-cache-mib).\n"
    "# TYPE aff_prefix_cache_capacity_bytes gauge\n"
    "aff_prefix_cache_capacity_bytes 1048576\n"
    "# HELP aff_prefix_cache_bytes Memory the prefix cache holds.\n"
    "# TYPE aff_prefix_cache_bytes gauge\n"
    "aff_prefix_cache_bytes 4096\n"
    "# HELP aff_prefix_cache_entries Snapshots the prefix cache holds.\n"
    "# TYPE aff_prefix_cache_entries gauge\n"
    "aff_prefix_cache_entries 3\n"
    "# HELP aff_prefix_cache_lookups_total Prompts looked up in the prefix cache.\n"
    "# TYPE aff_prefix_cache_lookups_total counter\n"
    "aff_prefix_cache_lookups_total 11\n"
    "# HELP aff_prefix_cache_hits_total Lookups that restored a cached prefix.\n"
    "# TYPE aff_prefix_cache_hits_total counter\n"
    "aff_prefix_cache_hits_total 7\n"
    "# HELP aff_prefix_cache_evictions_total Snapshots dropped to stay within the budget.\n"
    "# TYPE aff_prefix_cache_evictions_total counter\n"
    "aff_prefix_cache_evictions_total 2\n";

// Two generations, five requests (one to an unknown path, one to a scanner's), one
// cancelled generation and two refusals.
void fill(Metrics& m) {
    m.count_request("/health", 200);
    m.count_request("/health", 200);
    m.count_request("/v1/models/nope", 404);
    m.count_request("/wp-admin", 404);
    m.count_request("/.env", 404);
    m.add_generation(10, 5, 0.25, 4, 0.5);
    m.add_generation(7, 0, 0.125, 5, 0.625);
    m.count_cancelled();
    m.count_rejected_full();
    m.count_rejected_full();
    m.observe_first_token(0.03);
    m.observe_first_token(0.7);
    m.observe_token_interval(0.012);
    m.observe_token_interval(0.012);
    m.observe_token_interval(3.0);  // past the last bound: only +Inf counts it
}

}  // namespace

TEST_CASE("metrics render the exact Prometheus text", "[serve]") {
    Metrics m;
    fill(m);
    CHECK(m.render(4, true, false) == kPlain);
    PrefixCacheStats cache;
    cache.capacity_bytes = 1 << 20;
    cache.bytes = 4096;
    cache.entries = 3;
    cache.lookups = 11;
    cache.hits = 7;
    cache.hit_tokens = 40;  // not exported
    cache.inserts = 5;      // not exported
    cache.evictions = 2;
    CHECK(m.render(4, true, false, cache) == std::string(kPlain) + kCache);
}

TEST_CASE("metrics of a fresh server are zeros with no request lines", "[serve]") {
    const std::string text = Metrics().render(0, false, true);
    CHECK(text.find("aff_requests_total{") == std::string::npos);
    CHECK(text.find("\naff_request_errors_total 0\n") != std::string::npos);
    CHECK(text.find("\naff_prompt_seconds_total 0\n") != std::string::npos);
    CHECK(text.find("\naff_generation_active 0\n") != std::string::npos);
    CHECK(text.find("\naff_ready 1\n") != std::string::npos);
    CHECK(text.find("prefix_cache") == std::string::npos);
    CHECK(text.find("\naff_time_to_first_token_seconds_bucket{le=\"+Inf\"} 0\n") != std::string::npos);
    CHECK(text.find("\naff_time_per_output_token_seconds_count 0\n") != std::string::npos);
}

TEST_CASE("metrics carry speculative decoding's counters once a generation drafted", "[serve]") {
    Metrics m;
    CHECK(m.render(0, false, true).find("aff_draft") == std::string::npos);
    m.add_drafts(4, {4, 3}, {3, 1});
    m.add_drafts(2, {2, 2, 1}, {2, 0, 0});
    const std::string text = m.render(0, false, true);
    const char* const expected =
        "# HELP aff_draft_verify_calls_total Forward calls that verified draft tokens.\n"
        "# TYPE aff_draft_verify_calls_total counter\n"
        "aff_draft_verify_calls_total 6\n"
        "# HELP aff_draft_tokens_total Draft tokens proposed and verified.\n"
        "# TYPE aff_draft_tokens_total counter\n"
        "aff_draft_tokens_total 12\n"
        "# HELP aff_draft_accepted_tokens_total Draft tokens the model accepted.\n"
        "# TYPE aff_draft_accepted_tokens_total counter\n"
        "aff_draft_accepted_tokens_total 6\n"
        "# HELP aff_draft_position_tokens_total Verify calls that drafted a token at this position (0: the first after "
        "the verified token).\n"
        "# TYPE aff_draft_position_tokens_total counter\n"
        "aff_draft_position_tokens_total{position=\"0\"} 6\n"
        "aff_draft_position_tokens_total{position=\"1\"} 5\n"
        "aff_draft_position_tokens_total{position=\"2\"} 1\n"
        "# HELP aff_draft_position_accepted_total Verify calls that accepted the draft at this position and every one "
        "before it.\n"
        "# TYPE aff_draft_position_accepted_total counter\n"
        "aff_draft_position_accepted_total{position=\"0\"} 5\n"
        "aff_draft_position_accepted_total{position=\"1\"} 1\n"
        "aff_draft_position_accepted_total{position=\"2\"} 0\n";
    const std::size_t at = text.find("# HELP aff_draft_verify_calls_total");
    REQUIRE(at != std::string::npos);
    CHECK(text.substr(at) == expected);  // the last lines, after everything else
}

// The expert tiers' lines (aff_tier_*): present only when the engine reports tiers, after
// every other line but the drafts'; counters as given, ratios over the reads and the tokens.
TEST_CASE("metrics carry the expert tiers' counters when the experts are tiered", "[serve]") {
    Metrics m;
    CHECK(m.render(0, false, true).find("aff_tier") == std::string::npos);
    aff::TierStats t;
    t.tokens = 40;
    t.expert_reads = 200;
    t.gpu_hits = 150;
    t.host_hits = 50;
    t.ssd_reads = 0;
    t.pcie_bytes = 1000;
    t.ssd_bytes = 0;
    t.moves = 10;
    t.moved_bytes = 640;
    t.stall_seconds = 0.25;
    t.stalled_calls = 3;
    t.gpu_experts = 12;
    t.host_experts = 20;
    t.ssd_experts = 0;
    t.prefetched = 80;
    t.prefetch_hits = 60;
    const std::string text = m.render(0, false, true, std::nullopt, t);
    const std::size_t at = text.find("# HELP aff_tier_tokens_total");
    REQUIRE(at != std::string::npos);
    const std::string expected =
        "# HELP aff_tier_tokens_total Tokens of the forward calls the expert tiers' mover saw.\n"
        "# TYPE aff_tier_tokens_total counter\n"
        "aff_tier_tokens_total 40\n"
        "# HELP aff_tier_reads_total Routed-expert reads (distinct experts a layer of a call) by the tier that served them (ssd: read from the container).\n"
        "# TYPE aff_tier_reads_total counter\n"
        "aff_tier_reads_total{tier=\"gpu\"} 150\n"
        "aff_tier_reads_total{tier=\"host\"} 50\n"
        "aff_tier_reads_total{tier=\"ssd\"} 0\n"
        "# HELP aff_tier_hit_ratio Share of the routed-expert reads each tier served.\n"
        "# TYPE aff_tier_hit_ratio gauge\n"
        "aff_tier_hit_ratio{tier=\"gpu\"} 0.75\n"
        "aff_tier_hit_ratio{tier=\"host\"} 0.25\n"
        "aff_tier_hit_ratio{tier=\"ssd\"} 0\n"
        "# HELP aff_tier_experts Routed experts placed in each tier now.\n"
        "# TYPE aff_tier_experts gauge\n"
        "aff_tier_experts{tier=\"gpu\"} 12\n"
        "aff_tier_experts{tier=\"host\"} 20\n"
        "aff_tier_experts{tier=\"ssd\"} 0\n"
        "# HELP aff_tier_pcie_bytes_total Bytes over the bus for the tiers: host-pool reads and the mover's copies.\n"
        "# TYPE aff_tier_pcie_bytes_total counter\n"
        "aff_tier_pcie_bytes_total 1000\n"
        "# HELP aff_tier_pcie_bytes_per_token aff_tier_pcie_bytes_total over aff_tier_tokens_total.\n"
        "# TYPE aff_tier_pcie_bytes_per_token gauge\n"
        "aff_tier_pcie_bytes_per_token 25\n"
        "# HELP aff_tier_ssd_bytes_total Bytes of routed experts read from the SSD.\n"
        "# TYPE aff_tier_ssd_bytes_total counter\n"
        "aff_tier_ssd_bytes_total 0\n"
        "# HELP aff_tier_moves_total Experts the mover promoted into the GPU slab (each demotes one when it is full).\n"
        "# TYPE aff_tier_moves_total counter\n"
        "aff_tier_moves_total 10\n"
        "# HELP aff_tier_moves_per_token aff_tier_moves_total over aff_tier_tokens_total.\n"
        "# TYPE aff_tier_moves_per_token gauge\n"
        "aff_tier_moves_per_token 0.25\n"
        "# HELP aff_tier_moved_bytes_total Bytes the mover copied between the tiers.\n"
        "# TYPE aff_tier_moved_bytes_total counter\n"
        "aff_tier_moved_bytes_total 640\n"
        "# HELP aff_tier_mover_stall_seconds_total Seconds the GPU waited for the mover's copies before a forward call could start.\n"
        "# TYPE aff_tier_mover_stall_seconds_total counter\n"
        "aff_tier_mover_stall_seconds_total 0.25\n"
        "# HELP aff_tier_mover_stalled_calls_total Forward calls that waited for the mover's copies.\n"
        "# TYPE aff_tier_mover_stalled_calls_total counter\n"
        "aff_tier_mover_stalled_calls_total 3\n"
        "# HELP aff_tier_prefetched_total Pooled experts the decode prefetch copied into GPU memory during attention (--expert-prefetch).\n"
        "# TYPE aff_tier_prefetched_total counter\n"
        "aff_tier_prefetched_total 80\n"
        "# HELP aff_tier_prefetch_hit_ratio Share of the prefetched experts the router then chose.\n"
        "# TYPE aff_tier_prefetch_hit_ratio gauge\n"
        "aff_tier_prefetch_hit_ratio 0.75\n";
    CHECK(text.substr(at) == expected);
    // No reads or tokens yet: the ratios are 0, not NaN.
    const std::string empty = m.render(0, false, true, std::nullopt, aff::TierStats{});
    CHECK(empty.find("aff_tier_hit_ratio{tier=\"gpu\"} 0\n") != std::string::npos);
    CHECK(empty.find("aff_tier_pcie_bytes_per_token 0\n") != std::string::npos);
    CHECK(empty.find("nan") == std::string::npos);
}
