// aff-serve's board feed: the Drafts panel from the counts /metrics renders, summed over the
// finished generations and the running one as its verify calls go; drafts off said so; the
// feed reached through the hooks the server wraps (ObservedRequest), the Tiers panel
// through the forward-call hook.
#include "libaff/serve/metrics.hpp"
#include "libaff/serve/test_engine.hpp"
#include "libaff/ui/dash_layout.hpp"
#include "libaff/ui/figures_text.hpp"
#include "libaff/ui/serve_feed.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace aff;
using namespace aff::ui;

namespace {

GenerateStats stats(std::size_t verify_calls, std::vector<std::size_t> drafted_at, std::vector<std::size_t> accepted_at) {
    GenerateStats s;
    s.verify_calls = verify_calls;
    s.drafted_at = std::move(drafted_at);
    s.accepted_at = std::move(accepted_at);
    return s;
}

// The value of one unlabelled sample line of /metrics.
std::string metric(const std::string& text, const std::string& name) {
    const std::string key = "\n" + name + " ";
    const std::size_t at = text.find(key);
    if (at == std::string::npos) return "absent";
    const std::size_t from = at + key.size();
    return text.substr(from, text.find('\n', from) - from);
}

bool contains(const Frame& f, const std::string& text) { return f.text().find(text) != std::string::npos; }

}  // namespace

TEST_CASE("the serve feed's drafts are /metrics' counts, live and over generations", "[ui]") {
    StatsBoard board("aff-serve");
    ServeFeed feed(board);
    serve::Metrics metrics;
    // Generation 1: two verify calls so far, then a third.
    const std::uint64_t one = feed.queued(4);
    feed.started(one);
    feed.verified(one, stats(2, {2, 1}, {2, 0}));
    REQUIRE(board.snapshot().drafts);
    CHECK(board.snapshot().drafts->verify_calls == 2);
    CHECK(board.snapshot().drafts->acceptance_rate == Approx(2.0 / 3.0));
    const GenerateStats first = stats(3, {3, 2}, {2, 1});
    feed.verified(one, first);  // the same generation, further on: replaces its figures
    feed.finished(one);
    metrics.add_drafts(first.verify_calls, first.drafted_at, first.accepted_at);
    // Generation 2, running: its figures add to the first's.
    const std::uint64_t two = feed.queued(6);
    feed.started(two);
    const GenerateStats second = stats(4, {4, 4, 1}, {4, 2, 0});
    feed.verified(two, second);
    metrics.add_drafts(second.verify_calls, second.drafted_at, second.accepted_at);
    const DraftFigures d = *board.snapshot().drafts;
    const std::string text = metrics.render(0, true, true);
    CHECK(metric(text, "aff_draft_verify_calls_total") == std::to_string(d.verify_calls));
    CHECK(d.verify_calls == 7);
    CHECK(metric(text, "aff_draft_tokens_total") == "14");
    CHECK(metric(text, "aff_draft_accepted_tokens_total") == "9");
    CHECK(d.acceptance_rate == Approx(9.0 / 14.0));
    CHECK(d.mean_accepted_length == Approx(9.0 / 7.0));
    CHECK(d.drafting);
    const Frame f = render_dash(board.snapshot(), 24, 80, true);
    CHECK(contains(f, "─ Drafts ─ 7 verify calls ─"));
    CHECK(contains(f, "accepted 64.3 %  mean length 1.29"));
    CHECK(plain_line(board.snapshot()).find(" verify_calls=7 accept=0.643 accepted_len=1.29 ") != std::string::npos);
    // Finished: the totals stay.
    feed.finished(two);
    CHECK(board.snapshot().drafts->verify_calls == 7);
}

TEST_CASE("the server's hooks reach the feed: verified proposals and forward calls", "[ui]") {
    StatsBoard board("aff-serve");
    ServeFeed feed(board);
    serve::TestEngine engine;
    feed.engine_ready(false, engine.sequence());
    {
        const Frame f = render_dash(board.snapshot(), 24, 80, true);
        CHECK(contains(f, "─ Drafts ─ off ─"));
        CHECK(plain_line(board.snapshot()).find(" drafts=off ") != std::string::npos);
    }
    int inner_verified = 0, inner_dispatched = 0;
    {
        serve::ObservedRequest watch(&feed, 3);
        watch.started();
        GenerateHooks mine;
        mine.on_verified = [&](const GenerateStats&) { ++inner_verified; };
        mine.between_dispatches = [&](const Dispatch&) { ++inner_dispatched; };
        const GenerateHooks hooks = watch.observe(mine, engine);
        hooks.on_verified(stats(1, {2}, {1}));
        hooks.between_dispatches(Dispatch{});
        CHECK(inner_verified == 1);  // the caller's own hooks still run
        CHECK(inner_dispatched == 1);
        REQUIRE(board.snapshot().drafts);
        CHECK(board.snapshot().drafts->drafting);  // a verified proposal means drafts are on
        CHECK(board.snapshot().drafts->acceptance_rate == Approx(0.5));
        REQUIRE(board.snapshot().tiers);
        CHECK_FALSE(board.snapshot().tiers->tiered);  // the scripted sequence keeps no tiers
    }
    CHECK(board.snapshot().done == 1);
}
