// The figures' store: times are given explicitly, so every rate is known exactly.
#include "libaff/ui/stats.hpp"

#include <catch2/catch.hpp>

using namespace aff::ui;
using namespace std::chrono_literals;
using Clock = StatsBoard::Clock;

TEST_CASE("a request's prefill, time to first token and decode rate", "[ui]") {
    const Clock::time_point t0 = Clock::now();
    StatsBoard b("aff-run", t0);
    const auto id = b.add_request(40, t0);
    b.start_request(id, t0 + 20ms);  // waited 20 ms
    b.add_token(id, t0 + 120ms);     // prefill took 100 ms
    for (int i = 1; i <= 10; ++i) b.add_token(id, t0 + 120ms + i * 10ms);  // 100 tok/s
    const Snapshot s = b.snapshot(t0 + 230ms);
    CHECK(s.tool == "aff-run");
    CHECK(s.throughput.ttft_ms == Approx(120));
    CHECK(s.throughput.prefill_tok_s == Approx(400));  // 40 tokens in 100 ms
    CHECK(s.throughput.decode_tok_s == Approx(100).epsilon(1e-6));
    CHECK(s.throughput.prompt_tokens == 40);
    CHECK(s.throughput.generated_tokens == 11);
    REQUIRE(s.requests.size() == 1);
    CHECK(s.requests[0].state == RequestState::running);
    CHECK(s.requests[0].tokens == 11);
    CHECK(s.requests[0].tok_s == Approx(100).epsilon(1e-6));
    CHECK(s.running == 1);
    CHECK(s.throughput.decode_history.empty());  // no whole second has passed
    CHECK(s.throughput.decode_mean_tok_s == Approx(100).epsilon(1e-6));  // but the minute's mean counts this one
    // Nothing decoded in the last second: "now" is zero again.
    CHECK(b.snapshot(t0 + 1500ms).throughput.decode_tok_s == 0);
}

TEST_CASE("the idle gap between two requests is not counted as decoding", "[ui]") {
    const Clock::time_point t0 = Clock::now();
    StatsBoard b("aff-serve", t0);
    const auto a = b.add_request(1, t0);
    b.start_request(a, t0);
    for (int i = 0; i <= 4; ++i) b.add_token(a, t0 + i * 10ms);  // 4 steps in 40 ms
    b.finish_request(a, t0 + 40ms);
    const auto c = b.add_request(1, t0 + 500ms);
    b.start_request(c, t0 + 500ms);
    for (int i = 0; i <= 2; ++i) b.add_token(c, t0 + 500ms + i * 20ms);  // 2 steps in 40 ms
    // The first token of each is the prefill's. Decode tokens: a at 10..40 ms (3 steps in
    // 30 ms), c at 520 and 540 ms (1 step in 20 ms): 4 steps over 50 ms of decoding, not
    // over the 530 ms from the first decode token to the last.
    CHECK(b.snapshot(t0 + 600ms).throughput.decode_tok_s == Approx(80).epsilon(1e-6));
}

TEST_CASE("a fast decode keeps only the latest tokens for its rate, and the rate is right", "[ui]") {
    const Clock::time_point t0 = Clock::now();
    StatsBoard b("aff-run", t0);
    const auto id = b.add_request(1, t0);
    b.start_request(id, t0);
    for (int i = 0; i <= 10000; ++i) b.add_token(id, t0 + i * 50us);  // 20 000 tok/s for half a second
    CHECK(b.snapshot(t0 + 500ms).throughput.decode_tok_s == Approx(20000).epsilon(1e-6));
    CHECK(b.snapshot(t0 + 500ms).throughput.generated_tokens == 10001);
}

TEST_CASE("cached prompt tokens are not counted as prefilled", "[ui]") {
    const Clock::time_point t0 = Clock::now();
    StatsBoard b("aff-serve", t0);
    const auto id = b.add_request(100, t0);
    b.start_request(id, t0);
    b.set_cached(id, 80);
    b.add_token(id, t0 + 10ms);
    const Snapshot s = b.snapshot(t0 + 10ms);
    CHECK(s.throughput.prefill_tok_s == Approx(2000));  // 20 computed tokens in 10 ms
    CHECK(s.throughput.cached_tokens == 80);
    CHECK(s.requests[0].cached_tokens == 80);
}

TEST_CASE("the last minute is kept per second, oldest first", "[ui]") {
    const Clock::time_point t0 = Clock::now();
    StatsBoard b("aff-run", t0);
    const auto id = b.add_request(1, t0);
    b.start_request(id, t0);
    b.add_token(id, t0);  // the first token (prefill)
    // 5 tokens in second 0, none in second 1, 3 in second 2.
    for (int i = 1; i <= 5; ++i) b.add_token(id, t0 + i * 100ms);
    for (int i = 1; i <= 3; ++i) b.add_token(id, t0 + 2s + i * 100ms);
    const Snapshot s = b.snapshot(t0 + 3s + 1ms);
    CHECK(s.throughput.decode_history == std::vector<double>{5, 0, 3});
    // 8 tokens over the time their steps took: 5 x 100 ms, then 1.6 s and 2 x 100 ms.
    CHECK(s.throughput.decode_mean_tok_s == Approx(8 / 2.3));
    // Two minutes later the history holds 60 seconds, all idle.
    const Snapshot later = b.snapshot(t0 + 120s);
    CHECK(later.throughput.decode_history.size() <= StatsBoard::history_seconds);
    CHECK(later.throughput.decode_mean_tok_s == 0);
}

TEST_CASE("requests move from queued to running to done, and old ones are dropped", "[ui]") {
    const Clock::time_point t0 = Clock::now();
    StatsBoard b("aff-serve", t0);
    const auto a = b.add_request(5, t0), c = b.add_request(6, t0);
    b.start_request(a, t0);
    Snapshot s = b.snapshot(t0);
    CHECK(s.queued == 1);
    CHECK(s.running == 1);
    b.finish_request(a, t0 + 1ms);
    s = b.snapshot(t0 + 1ms);
    CHECK(s.done == 1);
    CHECK(s.requests.front().id == c);  // waiting ahead of finished
    CHECK(s.requests.back().state == RequestState::done);
    const std::uint64_t before = b.version();
    for (std::size_t i = 0; i < StatsBoard::kept_done + 5; ++i) b.finish_request(b.add_request(1, t0), t0);
    CHECK(b.version() > before);
    s = b.snapshot(t0);
    CHECK(s.done == StatsBoard::kept_done);
    CHECK(s.queued == 1);
}

TEST_CASE("drafts and tiers stay absent until published", "[ui]") {
    StatsBoard b("aff-run");
    CHECK_FALSE(b.snapshot().drafts);
    CHECK_FALSE(b.snapshot().tiers);
    CHECK_FALSE(b.snapshot().gpus);
    b.publish_drafts(DraftFigures{true, 4, 0.75, 2.5});
    TierFigures t;
    t.hit_rates = {{"GPU", 0.9}};
    b.publish_tiers(t);
    const Snapshot s = b.snapshot();
    REQUIRE(s.drafts);
    CHECK(s.drafts->acceptance_rate == 0.75);
    REQUIRE(s.tiers);
    CHECK(s.tiers->hit_rates[0].tier == "GPU");
}

TEST_CASE("log and output keep their latest part", "[ui]") {
    StatsBoard b("aff-run");
    for (std::size_t i = 0; i < StatsBoard::kept_log + 3; ++i) b.add_log("line " + std::to_string(i));
    std::string big(3 * StatsBoard::kept_output, 'x');
    big += "END";
    b.add_output(big);
    const Snapshot s = b.snapshot();
    CHECK(s.log.size() == StatsBoard::kept_log);
    CHECK(s.log.back() == "line " + std::to_string(StatsBoard::kept_log + 2));
    CHECK(s.output.size() == StatsBoard::kept_output);
    CHECK(s.output.substr(s.output.size() - 3) == "END");
}
