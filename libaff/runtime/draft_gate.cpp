// DraftGate (draft_gate.hpp): windows of cycles with and without drafts, timed.
#include "libaff/runtime/draft_gate.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aff {

DraftGate::DraftGate(std::unique_ptr<Drafter> inner, Clock clock) : inner_(std::move(inner)), clock_(std::move(clock)) {
    if (!inner_) throw_internal("DraftGate: no drafter to gate");
    if (!clock_)
        clock_ = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
}

void DraftGate::start(const SamplerParams& sampling) {
    inner_->start(sampling);
    // What was measured carries over to the next generation (a server's requests): only the
    // time between generations is no cycle. The window goes on where it was.
    have_cycle_ = false;
    window_cycles_ = 0;  // the next cycle pays the drafter's catch-up over the new prompt
    update_listening();  // before the prompt runs: a drafter about to draft hears it
}

bool DraftGate::recall(const GateMemory& m) {
    if (!(m.plain_rate > 0) || !(m.drafting_rate > 0) || !std::isfinite(m.plain_rate) || !std::isfinite(m.drafting_rate))
        return false;
    rate_[0] = m.plain_rate;
    rate_[1] = m.drafting_rate;
    const int way = rate_[1] > rate_[0] ? 1 : 0;
    base_run_ = std::clamp(m.base_run, run_cycles, max_run_cycles);
    last_run_ = way;
    start_run(way);
    have_cycle_ = false;
    window_cycles_ = 0;
    update_listening();
    return true;
}

void DraftGate::update_listening() {
    const std::size_t warmup = inner_->warmup_positions();
    const bool want = warmup == 0 || drafting_ || probing_ || window_left_ <= warmup;
    if (want != listening_) {
        listening_ = want;
        heard_ = 0;
        inner_->set_listening(want);
    }
}

std::vector<std::int32_t> DraftGate::propose(std::span<const std::int32_t> context) {
    const double now = clock_();
    if (have_cycle_) close_cycle(now);
    have_cycle_ = true;
    cycle_start_ = now;
    cycle_tokens_ = 1;
    update_listening();
    if (listening_) heard_ = std::min(heard_ + 1, inner_->warmup_positions());  // this cycle's call is heard
    if (!drafting_) return {};
    return inner_->propose(context);
}

void DraftGate::verified(std::size_t proposed, std::size_t accepted) {
    inner_->verified(proposed, accepted);
    cycle_tokens_ += accepted;
}

void DraftGate::close_cycle(double now) {
    const double seconds = now - cycle_start_;
    window_seconds_ += seconds;
    window_tokens_ += cycle_tokens_;
    recent_seconds_ += seconds;
    recent_tokens_ += cycle_tokens_;
    if (window_cycles_++ > 0) {
        warm_tokens_ += cycle_tokens_;
        warm_seconds_ += seconds;
        fastest_warm_ = fastest_warm_ == 0 ? seconds : std::min(fastest_warm_, seconds);
    }
    --window_left_;
    auto rate = [](std::size_t tokens, double s) {
        return s > 0 ? double(tokens) / s : std::numeric_limits<double>::max();
    };
    double measured = rate(window_tokens_, window_seconds_);
    // A run ends early once its last probe_cycles cycles fall behind the other way's latest
    // rate (the costs changed: another prompt, another request); a plain run whose drafter
    // has not heard its warm-up yet runs the rest of it first (listening then).
    if (!probing_ && !cut_ && (run_length_ - window_left_) % probe_cycles == 0) {
        const double recent = rate(recent_tokens_, recent_seconds_);
        recent_seconds_ = 0;
        recent_tokens_ = 0;
        if (window_left_ > 0 && recent < rate_[drafting_ ? 0 : 1]) {
            const std::size_t warmup = inner_->warmup_positions();
            window_left_ = drafting_ || heard_ >= warmup ? 0 : std::min(window_left_, warmup - heard_);
            cut_ = true;
            cut_rate_ = recent;
        }
    }
    if (cut_) measured = cut_rate_;
    // A probe of drafts that cannot catch up any more ends now (see the header).
    if (probing_ && drafting_ && window_left_ > 0 && rate_[0] > 0 && warm_seconds_ > 0) {
        const double left = double(window_left_);
        const double best = (double(warm_tokens_) + left * double(max_tokens() + 1)) / (warm_seconds_ + left * fastest_warm_);
        if (best < rate_[0]) window_left_ = 0;
    }
    if (window_left_ > 0) return;
    // A window's rate leaves out its first cycle, which pays for the switch (see the header),
    // unless it had no other (a run cut short keeps its recent rate).
    if (probing_ && warm_seconds_ > 0) measured = rate(warm_tokens_, warm_seconds_);
    rate_[drafting_ ? 1 : 0] = measured;
    window_seconds_ = 0;
    window_tokens_ = 0;
    recent_seconds_ = 0;
    recent_tokens_ = 0;
    window_cycles_ = 0;
    warm_tokens_ = 0;
    warm_seconds_ = 0;
    fastest_warm_ = 0;
    cut_ = false;
    choose_next();
}

void DraftGate::start_run(int way) {
    drafting_ = way == 1;
    // A probe of the slower way costs about (faster / slower - 1) cycles of the faster way's
    // time a cycle: a run that many times longer keeps the probes' share of the time the same
    // however far behind the other way fell (on the 4-layer DSpark container of
    // tests/bench/dspark_auto_device.sh drafts ran 6 x slower than plain steps: a probe's two
    // cycles took about ten plain steps' time).
    const double margin = std::min(double(max_margin), rate_[way] / rate_[1 - way]);
    run_length_ = std::min(max_run_cycles, std::size_t(double(base_run_) * std::max(1.0, margin)));
    probing_ = false;
    window_left_ = run_length_;
}

void DraftGate::choose_next() {
    if (rate_[0] == 0 || rate_[1] == 0) {
        // One way not measured yet: probe it.
        drafting_ = rate_[1] == 0;
        probing_ = true;
        window_left_ = probe_cycles;
        return;
    }
    if (probing_) {
        // Both measured: run the faster way for a while, longer each time it stays the faster.
        drafting_ = rate_[1] > rate_[0];
        const int way = drafting_ ? 1 : 0;
        base_run_ = way == last_run_ ? std::min(4 * base_run_, max_run_cycles) : run_cycles;
        last_run_ = way;
        start_run(way);
    } else {
        // After a run, try the other way again briefly.
        drafting_ = !drafting_;
        probing_ = true;
        window_left_ = probe_cycles;
    }
}

}  // namespace aff
