// Tests for runtime/draft_gate.hpp (--draft auto): on a simulated clock, the gate keeps to
// drafting where a verify call plus its drafts yields tokens faster than plain decode steps,
// keeps to plain steps where it does not (the CPU reference on a small model), probes the
// other way now and then, measures both rates as simulated, and carries them over to the next
// generation, and to another gate (memory, recall: what draft_memory.hpp keeps between runs).
#include "libaff/runtime/draft_gate.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <vector>

namespace {

// Always guesses three tokens; counts what it is told. With a warm-up it says it needs that
// many trunk calls heard before a proposal (Drafter::warmup_positions), and counts the calls
// it hears (simulate() tells it of each) since listening came back on.
class ThreeGuesses final : public aff::Drafter {
public:
    explicit ThreeGuesses(std::size_t warmup = 0) : warmup_(warmup) {}
    std::size_t max_tokens() const override { return 3; }
    std::size_t warmup_positions() const override { return warmup_; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t>) override {
        ++proposals;
        if (ever_off && heard < warmup_) ++cold_proposals;  // drafted on less than the warm-up
        return {1, 2, 3};
    }
    void verified(std::size_t, std::size_t accepted) override { accepted_total += accepted; }
    bool draft_on_device() const override { return on_device; }
    void set_listening(bool on) override {
        if (on == listening) ++redundant;
        listening = on;
        if (on) heard = 0;
        else ever_off = true;
    }
    void trunk_call() {
        if (listening) ++heard;
        else ++deaf_calls;
    }
    std::size_t proposals = 0, accepted_total = 0;
    bool on_device = false;
    bool listening = true, ever_off = false;
    std::size_t heard = 0, deaf_calls = 0, cold_proposals = 0, redundant = 0;

private:
    std::size_t warmup_;
};

struct Costs {
    double plain_step, draft, verify;  // seconds
    std::size_t accepted;              // of the three guesses, every verify call
};

struct Run {
    std::size_t cycles = 0, drafting_cycles = 0, tokens = 0;
    std::size_t draft_stretches = 0;  // runs of consecutive drafting cycles
    std::size_t first_draft = 0;      // with stop_at_draft: the plain cycles before the first drafting one
};

// `cycles` proposals, each followed by what the loop would do with its answer. `d`, when
// given, hears of every trunk call and must agree with the gate on whether it listens;
// stop_at_draft: return at the first drafting proposal, before its verify call.
Run simulate(aff::DraftGate& gate, double& now, const Costs& c, std::size_t cycles, ThreeGuesses* d = nullptr,
             bool stop_at_draft = false) {
    Run r;
    r.first_draft = cycles;
    const std::vector<std::int32_t> context{0};
    for (std::size_t i = 0; i < cycles; ++i) {
        const bool was_drafting = gate.drafting() && r.cycles > 0;
        const auto guesses = gate.propose(context);
        if (d) CHECK(gate.listening() == d->listening);
        if (stop_at_draft && !guesses.empty()) {
            r.first_draft = i;
            return r;
        }
        ++r.cycles;
        if (!guesses.empty() && !was_drafting) ++r.draft_stretches;
        if (guesses.empty()) {
            now += c.plain_step;
            r.tokens += 1;
        } else {
            ++r.drafting_cycles;
            now += c.draft + c.verify;
            gate.verified(guesses.size(), c.accepted);
            r.tokens += 1 + c.accepted;
        }
        if (d) d->trunk_call();
    }
    return r;
}

}  // namespace

TEST_CASE("the draft gate keeps to drafting where it is faster and to plain steps where it is not", "[runtime]") {
    double now = 0;
    auto inner = std::make_unique<ThreeGuesses>();
    ThreeGuesses* drafter = inner.get();
    aff::DraftGate gate(std::move(inner), [&now] { return now; });
    gate.start({});
    CHECK(!gate.drafting());  // plain steps are measured first

    // Bound by reading weights (a GPU): a verify call costs little more than a step.
    const Costs fast{1.0, 0.2, 1.2, 2};
    const Run a = simulate(gate, now, fast, 640);
    CHECK(gate.drafting_rate() == Approx(3.0 / 1.4));
    CHECK(gate.plain_rate() == Approx(1.0));
    CHECK(double(a.drafting_cycles) / double(a.cycles) > 0.8);
    CHECK(drafter->proposals == a.drafting_cycles);  // plain cycles never ask the drafter
    CHECK(drafter->accepted_total == 2 * a.drafting_cycles);

    // Bound by arithmetic (the CPU on a small model): k+1 tokens cost k+1 steps. A new
    // generation keeps what was measured, so the gate drafts on until its run of drafts
    // measures the new cost, then keeps to plain steps but for probes of 8 cycles, further
    // apart each time one confirms that drafts lose.
    gate.start({});
    CHECK(gate.drafting());
    const Costs slow{1.0, 1.0, 4.0, 2};
    const Run b = simulate(gate, now, slow, 640);
    CHECK(gate.drafting_rate() == Approx(3.0 / 5.0));
    CHECK(gate.plain_rate() == Approx(1.0));
    CHECK(double(b.drafting_cycles) / double(b.cycles) < 0.25);
    CHECK(b.draft_stretches >= 3);  // the drafts it ran on with, and at least two probes
    const Run c = simulate(gate, now, slow, 4000);
    CHECK(double(c.drafting_cycles) / double(c.cycles) < 0.03);  // probes ever rarer
    CHECK(c.draft_stretches >= 1);  // but never none
    CHECK(!gate.drafting());
}

TEST_CASE("a probe of drafts that can no longer win ends after its second cycle", "[runtime]") {
    double now = 0;
    aff::DraftGate gate(std::make_unique<ThreeGuesses>(), [&now] { return now; });
    gate.start({});
    const Costs plain_only{1.0, 1.0, 1.0, 0};
    // Plain steps measured, 1 token a second (the next proposal closes the window's last cycle).
    simulate(gate, now, plain_only, aff::DraftGate::probe_cycles);
    // Nothing accepted and a cycle of 6 s: even every guess accepted from here on (4 tokens a
    // cycle) could not beat one token a second, so the probe stops after its first warm cycle.
    const Costs hopeless{1.0, 1.0, 5.0, 0};
    const Run probe = simulate(gate, now, hopeless, 3);
    CHECK(probe.drafting_cycles == 2);
    CHECK(!gate.drafting());
    CHECK(gate.drafting_rate() == Approx(2.0 / 12.0));
    CHECK(gate.plain_rate() == Approx(1.0));

    // A drafter that loses only narrowly (3 tokens in 3.05 s: 4 in the last cycle would still
    // win) is measured over the whole probe.
    double now2 = 0;
    aff::DraftGate gate2(std::make_unique<ThreeGuesses>(), [&now2] { return now2; });
    gate2.start({});
    simulate(gate2, now2, plain_only, aff::DraftGate::probe_cycles);
    const Costs narrow{1.0, 0.05, 3.0, 2};
    const Run full = simulate(gate2, now2, narrow, aff::DraftGate::probe_cycles + 1);
    CHECK(full.drafting_cycles == aff::DraftGate::probe_cycles);
    CHECK(!gate2.drafting());
    CHECK(gate2.drafting_rate() == Approx(3.0 / 3.05));
}

TEST_CASE("a window's first cycle, which pays for the switch, neither ends a probe nor counts in its rate",
          "[runtime]") {
    double now = 0;
    aff::DraftGate gate(std::make_unique<ThreeGuesses>(), [&now] { return now; });
    gate.start({});
    simulate(gate, now, Costs{1.0, 1.0, 1.0, 0}, aff::DraftGate::probe_cycles);
    // The first drafting cycle costs 40 s (a long catch-up); the rest win clearly.
    const std::vector<std::int32_t> context{0};
    REQUIRE(!gate.propose(context).empty());
    now += 40.0;
    gate.verified(3, 3);
    const Costs good{1.0, 0.2, 1.2, 3};
    const Run rest = simulate(gate, now, good, aff::DraftGate::probe_cycles);
    CHECK(rest.drafting_cycles == aff::DraftGate::probe_cycles);  // the probe ran its eight cycles, then a run
    CHECK(gate.drafting());
    CHECK(gate.drafting_rate() == Approx(4.0 / 1.4));  // the seven cycles after the catch-up

    // Plain steps whose first cycle captures a graph (10 s) against drafts that lose to warm
    // plain steps (3 tokens in 4 s): plain steps win, as they would without the capture.
    double now2 = 0;
    aff::DraftGate gate2(std::make_unique<ThreeGuesses>(), [&now2] { return now2; });
    gate2.start({});
    REQUIRE(gate2.propose(context).empty());
    now2 += 10.0;
    simulate(gate2, now2, Costs{1.0, 1.0, 1.0, 0}, aff::DraftGate::probe_cycles - 1);
    simulate(gate2, now2, Costs{1.0, 1.0, 3.0, 2}, aff::DraftGate::probe_cycles + 1);
    CHECK(gate2.plain_rate() == Approx(1.0));
    CHECK(gate2.drafting_rate() == Approx(0.75));
    CHECK(!gate2.drafting());
}

TEST_CASE("the draft gate says where its drafter's distributions are", "[runtime]") {
    // A GPU verify call reads the inner drafter's q rows on the device only if the gate passes
    // the drafter's word on (else they would come to the host and go back up).
    auto inner = std::make_unique<ThreeGuesses>();
    ThreeGuesses* raw = inner.get();
    aff::DraftGate gate(std::move(inner), [] { return 0.0; });
    CHECK_FALSE(gate.draft_on_device());
    raw->on_device = true;
    CHECK(gate.draft_on_device());
}


TEST_CASE("in long runs of plain steps the gate's drafter stops listening, and hears a warm-up before each probe",
          "[runtime]") {
    constexpr std::size_t warmup = 20;
    double now = 0;
    auto inner = std::make_unique<ThreeGuesses>(warmup);
    ThreeGuesses& d = *inner;
    aff::DraftGate gate(std::move(inner), [&now] { return now; });
    gate.start({});
    CHECK(gate.listening());
    // Drafts lose (3 tokens in 5 s against 1 a second): runs of plain steps 56, 224, 896, ...
    // cycles long, the drafter deaf in all but their last 20 cycles.
    const Costs slow{1.0, 1.0, 4.0, 2};
    simulate(gate, now, slow, 6000, &d);
    CHECK(d.ever_off);
    CHECK(d.deaf_calls > 4000);         // most of the plain steps
    CHECK(d.proposals >= 4);            // the probes went on
    CHECK(d.cold_proposals == 0);       // each after a warm-up heard
    CHECK(d.redundant == 0);            // told only of changes
    CHECK(!gate.drafting());

    // Plain steps slow down (3 s a token) while the drafter is deaf: the run is cut short at
    // its next check, but first the drafter hears its warm-up, then the probe of drafts runs.
    while (d.listening) simulate(gate, now, slow, 1, &d);
    simulate(gate, now, slow, 3, &d);
    REQUIRE(!d.listening);
    const std::size_t before = d.proposals;
    const Costs slower_plain{3.0, 1.0, 4.0, 2};
    const std::size_t to_probe = simulate(gate, now, slower_plain, 200, &d, true).first_draft;
    CHECK(to_probe >= warmup);
    CHECK(to_probe <= warmup + 2 * aff::DraftGate::probe_cycles);
    CHECK(d.proposals == before + 1);
    CHECK(d.cold_proposals == 0);
    CHECK(d.heard >= warmup);
}

TEST_CASE("a drafter without a warm-up is never told to stop listening", "[runtime]") {
    double now = 0;
    auto inner = std::make_unique<ThreeGuesses>(0);
    ThreeGuesses& d = *inner;
    aff::DraftGate gate(std::move(inner), [&now] { return now; });
    gate.start({});
    // The MTP drafter's case (its listening costs nothing): plain runs as long as above.
    simulate(gate, now, Costs{1.0, 1.0, 4.0, 2}, 3000, &d);
    CHECK(!d.ever_off);
    CHECK(d.deaf_calls == 0);
    CHECK(d.proposals >= 4);
}

TEST_CASE("a run is longer by the margin its way won by, up to 16 times", "[runtime]") {
    double now = 0;
    auto inner = std::make_unique<ThreeGuesses>(0);
    ThreeGuesses& d = *inner;
    aff::DraftGate gate(std::move(inner), [&now] { return now; });
    gate.start({});
    simulate(gate, now, Costs{1.0, 1.0, 1.0, 0}, aff::DraftGate::probe_cycles, &d);  // plain: 1 token a second
    // Drafts: nothing accepted in 6 s cycles, 6 times slower than plain steps (the probe ends
    // after its second cycle, its rate that cycle's token in 6 s): the plain run that follows
    // is 6 x 56 cycles, not 56 (the third proposal, which closed the probe, began its first).
    const Costs hopeless{1.0, 1.0, 5.0, 0};
    simulate(gate, now, hopeless, 3, &d);
    REQUIRE(gate.drafting_rate() == Approx(1.0 / 6.0));
    REQUIRE(!gate.drafting());
    CHECK(simulate(gate, now, hopeless, 2000, &d, true).first_draft == 6 * aff::DraftGate::run_cycles - 1);
    // Drafts 100 times slower: the run is capped at 16 times (its base 4 x 56 now, the second
    // time plain steps won).
    double now2 = 0;
    auto inner2 = std::make_unique<ThreeGuesses>(0);
    ThreeGuesses& d2 = *inner2;
    aff::DraftGate gate2(std::move(inner2), [&now2] { return now2; });
    gate2.start({});
    simulate(gate2, now2, Costs{1.0, 1.0, 1.0, 0}, aff::DraftGate::probe_cycles, &d2);
    const Costs awful{1.0, 1.0, 99.0, 0};
    simulate(gate2, now2, awful, 3, &d2);
    CHECK(simulate(gate2, now2, awful, 20000, &d2, true).first_draft == 16 * aff::DraftGate::run_cycles - 1);
    // The next probe, as hopeless (its first cycle was proposed and left at 0 s, its second
    // costs 100 s; the proposal after it closes the probe and starts the run).
    simulate(gate2, now2, awful, 2, &d2);
    CHECK(gate2.drafting_rate() == Approx(0.01));
    CHECK(simulate(gate2, now2, awful, 20000, &d2, true).first_draft == 16 * 4 * aff::DraftGate::run_cycles - 1);
}

TEST_CASE("a gate that recalls another's memory starts in a run of the faster way", "[runtime]") {
    // Learn: drafts lose 5 to 1 (3 tokens in 15 s against a token a second).
    double now = 0;
    aff::DraftGate teacher(std::make_unique<ThreeGuesses>(), [&now] { return now; });
    CHECK(teacher.memory().plain_rate == 0);  // nothing measured yet
    teacher.start({});
    const Costs losing{1.0, 5.0, 10.0, 2};
    simulate(teacher, now, losing, 64);
    const aff::GateMemory m = teacher.memory();
    CHECK(m.plain_rate == Approx(1.0));
    CHECK(m.drafting_rate == Approx(3.0 / 15.0));
    CHECK(m.last_run == 0);
    CHECK(m.base_run >= aff::DraftGate::run_cycles);

    // A new process: no probe of drafts in a short generation, and none for the run's length
    // (base_run times the margin 5).
    double now2 = 0;
    auto inner = std::make_unique<ThreeGuesses>();
    ThreeGuesses* d = inner.get();
    aff::DraftGate pupil(std::move(inner), [&now2] { return now2; });
    REQUIRE(pupil.recall(m));
    pupil.start({});
    CHECK(!pupil.drafting());
    const Run first = simulate(pupil, now2, losing, 5 * m.base_run - 1);
    CHECK(first.drafting_cycles == 0);
    CHECK(d->proposals == 0);
    const Run after = simulate(pupil, now2, losing, 2 * aff::DraftGate::probe_cycles);
    CHECK(after.drafting_cycles > 0);  // then it probes as usual
    CHECK(after.drafting_cycles <= aff::DraftGate::probe_cycles);

    // Drafts that won: the first proposal drafts.
    double now3 = 0;
    aff::DraftGate winner(std::make_unique<ThreeGuesses>(), [&now3] { return now3; });
    REQUIRE(winner.recall({1.0, 2.5, 224, 1}));
    winner.start({});
    CHECK(winner.drafting());
    const Run won = simulate(winner, now3, Costs{1.0, 0.2, 1.2, 2}, 16);
    CHECK(won.drafting_cycles == 16);
    CHECK(winner.memory().drafting_rate == Approx(2.5));  // no window closed yet: the recalled rates stand

    // Half a memory, or rates that are no rates, are not taken: the gate starts afresh.
    aff::DraftGate fresh(std::make_unique<ThreeGuesses>(), [] { return 0.0; });
    CHECK_FALSE(fresh.recall({1.0, 0.0, 56, 0}));
    CHECK_FALSE(fresh.recall({-1.0, 2.0, 56, 1}));
    CHECK_FALSE(fresh.recall({std::numeric_limits<double>::infinity(), 2.0, 56, 1}));
    CHECK(!fresh.drafting());
    CHECK(fresh.plain_rate() == 0);
    // A base run out of range is clamped to the gate's own bounds.
    aff::DraftGate clamped(std::make_unique<ThreeGuesses>(), [] { return 0.0; });
    REQUIRE(clamped.recall({1.0, 0.5, 1u << 30, 0}));
    CHECK(clamped.memory().base_run == aff::DraftGate::max_run_cycles);
}
