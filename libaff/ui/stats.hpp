// The figures a running aff-run or aff-serve publishes for its live view (--ui): one
// snapshot type that the dashboard and the plain-line reporter both read, so they show
// the same numbers. The run writes through StatsBoard's small calls (a lock and a clock
// read per token; nothing is formatted on the compute thread); the view thread takes a
// Snapshot when it draws. Drafts and tiers are optional: they stay empty (shown as "no
// figures yet") until the run publishes them (the tools do once the model is loaded).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace aff::ui {

// Prefill and decode speed: now (the last second) and per second over the last minute.
struct ThroughputFigures {
    double prefill_tok_s = 0;           // prompt tokens / prefill time of the latest request
    double decode_tok_s = 0;            // over the decode steps of the last second (idle gaps left out)
    double decode_mean_tok_s = 0;       // over the last minute: decode tokens / time spent decoding them
    std::vector<double> decode_history; // tokens per second, oldest first, at most 60
    double ttft_ms = -1;                // time to first token of the latest request; -1 none yet
    std::uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
};

enum class RequestState { queued, running, done };
const char* to_string(RequestState state);

struct RequestRow {
    std::uint64_t id = 0;
    RequestState state = RequestState::queued;
    std::size_t prompt_tokens = 0, cached_tokens = 0, tokens = 0;
    double tok_s = 0;  // decode speed of this request so far
};

// Speculative decoding: aff-run and aff-serve publish these as the verify calls go.
struct DraftFigures {
    bool drafting = true;              // false: drafts are off (no drafter)
    std::uint64_t verify_calls = 0;    // 0: none yet (the rates mean nothing)
    double acceptance_rate = 0;        // accepted / drafted tokens
    double mean_accepted_length = 0;   // accepted tokens per verify step
};

// Where the routed experts live and what the tiers cost (ui/tier_feed.hpp publishes them
// from the sequence's ExpertTierSnapshot).
struct TierHitRate {
    std::string tier;  // "GPU", "host", "SSD"
    double hit_rate = 0;
};
struct TierFigures {
    // false: every expert in one place, named by `resident` ("CPU", "GPU"); nothing moves,
    // and the figures below are 0.
    bool tiered = false;
    std::string resident;
    std::string why;                     // why tiered, or why not
    std::int64_t on_gpu = 0, in_host = 0, on_ssd = 0;  // experts in each tier now
    bool has_ssd_tier = false;           // none has one yet: ssd_bytes_s is 0 and shown as absent
    std::vector<TierHitRate> hit_rates;  // since the model loaded, of the distinct experts a layer read
    double pcie_bytes_s = 0, ssd_bytes_s = 0;  // over about the last second of calls
    double moves_per_token = 0;          // since the model loaded
    double cpu_expert_share = 0;         // routed expert calls computed on the CPU (none do yet)
};

enum class Tier : std::uint8_t { unknown, gpu, host, ssd };
const char* to_string(Tier tier);

// Layers x experts: where each routed expert lives and how often it is routed to.
struct ExpertPlane {
    int layers = 0, experts = 0;
    std::vector<Tier> tier;   // [layers * experts]; empty = unknown
    std::vector<float> heat;  // [layers * experts] in [0, 1]; empty = no routing figures
    // Say where the figures come from; a placeholder source says so here and is drawn
    // marked as such (the plane's shape and tiers can be real while its heat is not).
    // tier_source is empty where every expert is in one tier (the Tiers panel says which).
    std::string heat_source, tier_source;
    bool heat_placeholder = true;
    bool tier_placeholder = true;
};

struct GpuFigures {
    std::string name;
    double utilisation_pct = -1;        // -1: not reported
    double memory_used_bytes = -1, memory_total_bytes = -1;
    double power_w = -1;
    double sm_clock_mhz = -1, memory_clock_mhz = -1;
};

struct Snapshot {
    std::string tool;   // "aff-run", "aff-serve"
    std::string title;  // model and backend, one line
    double elapsed_s = 0;
    ThroughputFigures throughput;
    std::vector<RequestRow> requests;  // aff-serve: queued and running first, then the latest done
    std::size_t queued = 0, running = 0, done = 0;
    std::optional<DraftFigures> drafts;
    std::optional<TierFigures> tiers;
    ExpertPlane plane;
    std::optional<std::vector<GpuFigures>> gpus;  // nothing: no GPU library (the panel is hidden)
    std::vector<std::string> log;  // the latest log lines
    std::string output;            // the tail of the generated text (aff-run)
};

// Thread-safe store of the figures. Requests are numbered by add_request.
class StatsBoard {
public:
    using Clock = std::chrono::steady_clock;
    explicit StatsBoard(std::string tool, Clock::time_point start = Clock::now());

    void set_title(std::string title);
    std::uint64_t add_request(std::size_t prompt_tokens, Clock::time_point now = Clock::now());
    // The request holds the engine now (prefill begins); cached: prompt tokens it will not compute.
    void start_request(std::uint64_t id, Clock::time_point now = Clock::now());
    // One generated token. The first also ends the prefill (time to first token).
    void add_token(std::uint64_t id, Clock::time_point now = Clock::now());
    void set_cached(std::uint64_t id, std::size_t cached_tokens);
    void finish_request(std::uint64_t id, Clock::time_point now = Clock::now());

    void publish_drafts(const DraftFigures& figures);
    void publish_tiers(const TierFigures& figures);
    void publish_plane(ExpertPlane plane);
    // One half of the plane, keeping the other's: the heat (RouteHeat) and the tiers
    // (TierFeed) come from different sources. Ignored unless the size is layers * experts.
    void publish_plane_heat(std::vector<float> heat, std::string source);
    void publish_plane_tiers(std::vector<Tier> tier, std::string source);
    void publish_gpus(std::optional<std::vector<GpuFigures>> gpus);

    void add_log(std::string line);
    void add_output(const std::string& text);

    Snapshot snapshot(Clock::time_point now = Clock::now()) const;
    // Bumped by every change; the plain reporter prints only when it moved.
    std::uint64_t version() const;

    static constexpr std::size_t history_seconds = 60;
    static constexpr std::size_t kept_done = 16;     // finished requests kept as rows
    static constexpr std::size_t kept_log = 64;      // log lines kept
    static constexpr std::size_t kept_output = 4096; // bytes of output kept
    static constexpr std::size_t kept_recent = 4096; // decode tokens of the last second kept for its rate

private:
    struct Request {
        RequestRow row;
        Clock::time_point added, started, first_token, last_token;
        bool has_first = false;
    };
    Request* find(std::uint64_t id);
    void advance_seconds(Clock::time_point now);
    std::int64_t second_of(Clock::time_point t) const;

    const std::string tool_;
    const Clock::time_point start_;
    mutable std::mutex mutex_;
    std::string title_;
    std::uint64_t next_id_ = 1, version_ = 0;
    std::deque<Request> requests_;  // queued and running, then finished (newest last)
    // Per whole second since start_, [first_second_, first_second_ + size): decode tokens and
    // the time their steps took (the gap to the request's previous token).
    struct Second {
        std::uint64_t tokens = 0;
        double busy_s = 0;
    };
    std::deque<Second> per_second_;
    std::int64_t first_second_ = 0;
    struct Recent {
        Clock::time_point at;
        std::uint64_t request;
    };
    std::deque<Recent> recent_;  // decode tokens of the last second
    double prefill_tok_s_ = 0, ttft_ms_ = -1;
    std::uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
    std::optional<DraftFigures> drafts_;
    std::optional<TierFigures> tiers_;
    ExpertPlane plane_;
    std::optional<std::vector<GpuFigures>> gpus_;
    std::deque<std::string> log_;
    std::string output_;
};

}  // namespace aff::ui
