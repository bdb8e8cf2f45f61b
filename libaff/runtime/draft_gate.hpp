// Drafting only while it pays (--draft auto). Whether speculative decoding is faster depends
// on the backend and the model: a verify call of k+1 tokens costs about one decode step where
// decoding is bound by reading the weights (a large model on a GPU), but about k+1 steps
// where it is bound by arithmetic (the CPU reference on a small model), and the drafts cost
// time of their own. So the gate measures both ways on the generation itself: it alternates
// windows of cycles with drafts (its inner drafter's guesses) and without (no guess: plain
// decode steps), a cycle being the time from one proposal to the next and the tokens it
// produced (1, plus the accepted guesses), and keeps to the faster way, trying the other for a
// short window now and then, less often while it keeps losing, and cutting a run short once
// it falls behind the other way's latest rate; a run is longer by the margin the faster way
// won by (up to 16 times), so a probe of a way far behind stays as cheap a share of the time
// as one of a way narrowly behind. A probe of drafts ends as soon as it cannot
// come out faster than plain steps even if each cycle left gave the most tokens a cycle can
// (every guess accepted) in the time of its fastest cycle so far: where drafts lose outright
// (no guess accepted, a verify call dearer than the steps it could save) a probe costs as few
// as two cycles, not eight, which is what a short generation can afford. A probe's first cycle
// (and a generation's first) counts neither towards that test nor in the probe's rate: it
// pays for the switch, once a window, which the cycles after it do not (drafts: the drafter's
// catch-up over the plain steps or the prompt before it, the MTP layer's ring; plain steps:
// the first decode step's graph capture after the prompt, which made a launch-bound model's
// plain steps look slower than its drafts). In a run of plain steps longer than the drafter's
// warm-up (Drafter::warmup_positions: DSpark's window) the drafter stops listening to the
// trunk (Drafter::set_listening: DSpark's taps, on the GPU copied to the host every call) and
// listens again for the run's last warm-up's worth of steps, so the probe of drafts after it
// drafts as if it had listened throughout; a run cut short while not listening first runs
// that warm-up. What it measured carries over from one generation to the next
// (a server's requests), the faster way being re-measured in each of its runs, and from one
// process to the next through memory() and recall() (draft_memory.hpp keeps it in a file):
// a gate that recalls both rates starts in a run of the faster way as long as its last run,
// so a short generation where drafts lose pays no probe at all. Outputs do not
// depend on it (drafting never changes greedy
// output, nor the distribution of sampled output); with sampling, which steps drafted does
// change the draws a seed gives, and that now depends on timing.
#pragma once

#include "libaff/runtime/drafter.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace aff {

// What a gate has learned, for the next process on the same model, drafts and backend.
struct GateMemory {
    double plain_rate = 0, drafting_rate = 0;  // tokens a second; 0: not measured
    std::size_t base_run = 0;                  // cycles its last run's base lasted (run_cycles ..)
    int last_run = -1;                         // that run's way (1: drafts), -1: none
};

class DraftGate final : public Drafter {
public:
    using Clock = std::function<double()>;  // seconds, monotonic
    // Cycles a probing window lasts (a probe of drafts that cannot win ends sooner), and cycles
    // the faster way runs between probes: first run_cycles, four times longer (up to
    // max_run_cycles) each time a probe confirms it, since a probe of the slower way costs time
    // (a probe of drafts also rebuilds the MTP layer's ring).
    // A run lasts that times the ratio of the faster way's rate to the slower's, up to
    // max_margin times (see choose_next).
    static constexpr std::size_t probe_cycles = 8, run_cycles = 56, max_run_cycles = 14336, max_margin = 16;

    // `clock` null: the steady clock. `inner` must not be null.
    explicit DraftGate(std::unique_ptr<Drafter> inner, Clock clock = nullptr);

    std::size_t max_tokens() const override { return inner_->max_tokens(); }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override;
    std::span<const float> draft_distribution(std::size_t i) const override {
        return inner_->draft_distribution(i);
    }
    bool draft_on_device() const override { return inner_->draft_on_device(); }
    void start(const SamplerParams& sampling) override;
    void verified(std::size_t proposed, std::size_t accepted) override;

    // Tokens a second measured in the latest window of each way (0: not measured yet).
    // Plain steps are measured first, then drafts.
    double drafting_rate() const { return rate_[1]; }
    double plain_rate() const { return rate_[0]; }
    // Whether the cycle now running drafts.
    bool drafting() const { return drafting_; }
    // Whether the inner drafter is listening to the trunk's calls now (see the header).
    bool listening() const { return listening_; }
    GateMemory memory() const { return {rate_[0], rate_[1], base_run_, last_run_}; }
    // Before the first generation: start from what another gate learned. With both rates it
    // runs the faster way at once, base_run (clamped to run_cycles .. max_run_cycles) times
    // the margin cycles long, then probes as usual; without both it starts afresh. Returns
    // whether it took the memory.
    bool recall(const GateMemory& m);

private:
    void close_cycle(double now);
    void choose_next();
    // A run of `way` (1: drafts) base_run_ times the margin it won by (both rates measured).
    void start_run(int way);
    // Listening on unless this is a run of plain steps with more than the drafter's warm-up
    // left; counts the cycles heard since it came on.
    void update_listening();

    std::unique_ptr<Drafter> inner_;
    Clock clock_;
    bool drafting_ = false;  // the way of the cycle running now: plain steps are measured first
    bool probing_ = true;    // the window running now is a probe
    bool have_cycle_ = false;
    double cycle_start_ = 0;
    std::size_t cycle_tokens_ = 0;
    std::size_t window_left_ = probe_cycles;
    std::size_t base_run_ = run_cycles;   // run_cycles, 4 times more each time a probe confirms the way
    std::size_t run_length_ = run_cycles;  // the run now: base_run_ times the faster way's margin
    int last_run_ = -1;  // the way of the last run window (1: drafts), -1: none yet
    bool listening_ = true;
    std::size_t heard_ = 0;  // cycles since listening came on (saturating at the warm-up)
    // A run cut short (it fell behind the other way): its recent rate is what it measured.
    bool cut_ = false;
    double cut_rate_ = 0;
    // The current window's sums, and each way's rate from its latest complete window.
    double window_seconds_ = 0, recent_seconds_ = 0;
    std::size_t window_tokens_ = 0, recent_tokens_ = 0;  // recent: the run's last probe_cycles cycles
    // The current window's cycles, and those after its first (warm): their sums and the fastest.
    std::size_t window_cycles_ = 0, warm_tokens_ = 0;
    double warm_seconds_ = 0, fastest_warm_ = 0;
    double rate_[2] = {0, 0};
};

}  // namespace aff
