// The figures' store (see stats.hpp).
#include "libaff/ui/stats.hpp"

#include <algorithm>

namespace aff::ui {
namespace {

double seconds(StatsBoard::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

const char* to_string(RequestState state) {
    switch (state) {
        case RequestState::queued: return "queued";
        case RequestState::running: return "running";
        case RequestState::done: return "done";
    }
    return "queued";
}

const char* to_string(Tier tier) {
    switch (tier) {
        case Tier::gpu: return "GPU";
        case Tier::host: return "host";
        case Tier::ssd: return "SSD";
        case Tier::unknown: break;
    }
    return "unknown";
}

StatsBoard::StatsBoard(std::string tool, Clock::time_point start) : tool_(std::move(tool)), start_(start) {}

std::int64_t StatsBoard::second_of(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::seconds>(t - start_).count();
}

// Keeps one bucket per whole second up to `now`'s, at most history_seconds + 1.
void StatsBoard::advance_seconds(Clock::time_point now) {
    const std::int64_t s = second_of(now);
    if (per_second_.empty()) first_second_ = s;
    while (first_second_ + std::int64_t(per_second_.size()) <= s) per_second_.push_back({});
    while (per_second_.size() > history_seconds + 1) {
        per_second_.pop_front();
        ++first_second_;
    }
    while (!recent_.empty() && now - recent_.front().at > std::chrono::seconds(1)) recent_.pop_front();
    // The rate needs no more than a few thousand of them (and the view reads them all 5 times a second).
    while (recent_.size() > kept_recent) recent_.pop_front();
}

StatsBoard::Request* StatsBoard::find(std::uint64_t id) {
    for (Request& r : requests_)
        if (r.row.id == id) return &r;
    return nullptr;
}

void StatsBoard::set_title(std::string title) {
    std::lock_guard lock(mutex_);
    title_ = std::move(title);
    ++version_;
}

std::uint64_t StatsBoard::add_request(std::size_t prompt_tokens, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    Request r;
    r.row.id = next_id_++;
    r.row.prompt_tokens = prompt_tokens;
    r.added = now;
    // Waiting and running requests stay ahead of the finished ones.
    auto at = std::find_if(requests_.begin(), requests_.end(),
                           [](const Request& q) { return q.row.state == RequestState::done; });
    requests_.insert(at, r);
    prompt_tokens_ += prompt_tokens;
    ++version_;
    return r.row.id;
}

void StatsBoard::start_request(std::uint64_t id, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    if (Request* r = find(id)) {
        r->row.state = RequestState::running;
        r->started = now;
        ++version_;
    }
}

void StatsBoard::set_cached(std::uint64_t id, std::size_t cached_tokens) {
    std::lock_guard lock(mutex_);
    if (Request* r = find(id)) {
        cached_tokens_ += cached_tokens - std::min(cached_tokens, r->row.cached_tokens);
        r->row.cached_tokens = cached_tokens;
        ++version_;
    }
}

void StatsBoard::add_token(std::uint64_t id, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    Request* r = find(id);
    if (!r) return;
    ++r->row.tokens;
    ++generated_tokens_;
    if (!r->has_first) {
        // The first token ends the prefill: it costs a forward over the prompt, not a decode step.
        r->has_first = true;
        r->first_token = now;
        ttft_ms_ = seconds(now - r->added) * 1000.0;
        const double prefill_s = seconds(now - r->started);
        const std::size_t computed = r->row.prompt_tokens - std::min(r->row.prompt_tokens, r->row.cached_tokens);
        prefill_tok_s_ = prefill_s > 0 ? double(computed) / prefill_s : 0;
    } else {
        advance_seconds(now);
        ++per_second_.back().tokens;
        per_second_.back().busy_s += seconds(now - r->last_token);
        recent_.push_back({now, id});
        const double span = seconds(now - r->first_token);
        r->row.tok_s = span > 0 ? double(r->row.tokens - 1) / span : 0;
    }
    r->last_token = now;
    ++version_;
}

void StatsBoard::finish_request(std::uint64_t id, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(requests_.begin(), requests_.end(), [&](const Request& q) { return q.row.id == id; });
    if (it == requests_.end()) return;
    Request r = *it;
    requests_.erase(it);
    r.row.state = RequestState::done;
    requests_.push_back(r);
    std::size_t done = 0;
    for (const Request& q : requests_) done += q.row.state == RequestState::done;
    for (auto d = requests_.begin(); done > kept_done && d != requests_.end();) {
        if (d->row.state == RequestState::done) {
            d = requests_.erase(d);
            --done;
        } else {
            ++d;
        }
    }
    ++version_;
}

void StatsBoard::publish_drafts(const DraftFigures& figures) {
    std::lock_guard lock(mutex_);
    drafts_ = figures;
    ++version_;
}

void StatsBoard::publish_tiers(const TierFigures& figures) {
    std::lock_guard lock(mutex_);
    tiers_ = figures;
    ++version_;
}

void StatsBoard::publish_plane(ExpertPlane plane) {
    std::lock_guard lock(mutex_);
    plane_ = std::move(plane);
    ++version_;
}

// GPU readings change every sample: they do not bump the version (an idle server with a
// GPU would print a plain line every interval otherwise).
void StatsBoard::publish_plane_heat(std::vector<float> heat, std::string source) {
    std::lock_guard lock(mutex_);
    if (heat.size() != std::size_t(plane_.layers) * std::size_t(plane_.experts)) return;
    plane_.heat = std::move(heat);
    plane_.heat_source = std::move(source);
    plane_.heat_placeholder = false;
    ++version_;
}

void StatsBoard::publish_plane_tiers(std::vector<Tier> tier, std::string source) {
    std::lock_guard lock(mutex_);
    if (tier.size() != std::size_t(plane_.layers) * std::size_t(plane_.experts)) return;
    plane_.tier = std::move(tier);
    plane_.tier_source = std::move(source);
    plane_.tier_placeholder = false;
    ++version_;
}

void StatsBoard::publish_gpus(std::optional<std::vector<GpuFigures>> gpus) {
    std::lock_guard lock(mutex_);
    gpus_ = std::move(gpus);
}

void StatsBoard::add_log(std::string line) {
    std::lock_guard lock(mutex_);
    log_.push_back(std::move(line));
    while (log_.size() > kept_log) log_.pop_front();
    ++version_;
}

void StatsBoard::add_output(const std::string& text) {
    std::lock_guard lock(mutex_);
    output_ += text;
    if (output_.size() > 2 * kept_output) output_.erase(0, output_.size() - kept_output);
}

std::uint64_t StatsBoard::version() const {
    std::lock_guard lock(mutex_);
    return version_;
}

Snapshot StatsBoard::snapshot(Clock::time_point now) const {
    std::lock_guard lock(mutex_);
    Snapshot s;
    s.tool = tool_;
    s.title = title_;
    s.elapsed_s = seconds(now - start_);
    ThroughputFigures& t = s.throughput;
    t.prefill_tok_s = prefill_tok_s_;
    t.ttft_ms = ttft_ms_;
    t.prompt_tokens = prompt_tokens_;
    t.cached_tokens = cached_tokens_;
    t.generated_tokens = generated_tokens_;
    // The sparkline: complete seconds only (the current one is still filling), the last minute
    // of them, from the first that decoded. The mean: the whole minute, the current second too.
    const std::int64_t current = second_of(now);
    std::uint64_t tokens = 0;
    double busy = 0;
    for (std::int64_t sec = current - std::int64_t(history_seconds); sec <= current; ++sec) {
        const std::int64_t i = sec - first_second_;
        const Second n = (i >= 0 && i < std::int64_t(per_second_.size())) ? per_second_[std::size_t(i)] : Second{};
        if (sec < current && sec >= 0 && (!t.decode_history.empty() || n.tokens > 0))
            t.decode_history.push_back(double(n.tokens));
        tokens += n.tokens;
        busy += n.busy_s;
    }
    t.decode_mean_tok_s = busy > 0 ? double(tokens) / busy : 0;
    // Now: the decode tokens of the last second over the time between each request's first
    // and last of them, so the gap between two requests does not count as decoding.
    const Clock::time_point since = now - std::chrono::seconds(1);
    struct Span {
        std::uint64_t request, count;
        Clock::time_point first, last;
    };
    std::vector<Span> spans;
    for (const Recent& e : recent_) {
        if (e.at <= since) continue;
        if (spans.empty() || spans.back().request != e.request) spans.push_back({e.request, 0, e.at, e.at});
        ++spans.back().count;
        spans.back().last = e.at;
    }
    double steps = 0, span_s = 0;
    for (const Span& sp : spans) {
        steps += double(sp.count - 1);
        span_s += seconds(sp.last - sp.first);
    }
    if (span_s > 0) t.decode_tok_s = steps / span_s;
    for (const Request& r : requests_) {
        s.requests.push_back(r.row);
        switch (r.row.state) {
            case RequestState::queued: ++s.queued; break;
            case RequestState::running: ++s.running; break;
            case RequestState::done: ++s.done; break;
        }
    }
    s.drafts = drafts_;
    s.tiers = tiers_;
    s.plane = plane_;
    s.gpus = gpus_;
    s.log.assign(log_.begin(), log_.end());
    s.output = output_.size() > kept_output ? output_.substr(output_.size() - kept_output) : output_;
    return s;
}

}  // namespace aff::ui
