// DsparkDrafter (dspark_drafter.hpp): the rings' catch-up over the trunk's confirmed
// positions, the draft block, the sequential Markov correction and the confidence cut.
#include "libaff/runtime/dspark_drafter.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/cpu_dspark_runner.hpp"
#include "libaff/runtime/draft_sampling.hpp"

#include <algorithm>

namespace aff {

namespace {
const ModelConfig& config_of(const std::unique_ptr<DsparkRunner>& runner) {
    if (!runner) throw_internal("DsparkDrafter: no runner");
    return runner->config();
}
}  // namespace

DsparkDrafter::DsparkDrafter(std::unique_ptr<DsparkRunner> runner, std::size_t max_tokens, float min_survival)
    : runner_(std::move(runner)),
      max_tokens_(std::min(max_tokens, std::size_t(std::max(1, config_of(runner_).dspark.block_size)))),
      min_survival_(min_survival),
      row_(runner_->config().dspark.tap_layers.size() * std::size_t(runner_->config().hidden_size)),
      window_(runner_->config().sliding_window), q_(std::size_t(runner_->config().vocab_size)) {
    if (max_tokens == 0) throw_usage("the DSpark drafter needs at least one draft token");
    runner_->listen(this);
}

DsparkDrafter::DsparkDrafter(const Model& model, CpuSequence& trunk, std::size_t max_tokens, float min_survival)
    : DsparkDrafter(make_cpu_dspark_runner(model, trunk), max_tokens, min_survival) {}

DsparkDrafter::~DsparkDrafter() { runner_->listen(nullptr); }

void DsparkDrafter::start(const SamplerParams& sampling) {
    new_sequence_ = true;
    sampler_ = draft_sampler(sampling);
}

void DsparkDrafter::restart(std::int64_t position) { runner_->restart(position); }

void DsparkDrafter::extend_to(std::int64_t position) {
    const std::int64_t at = runner_->position();
    if (at >= position) return;
    runner_->extend(std::span<const float>(taps_).subspan(std::size_t(at - taps_start_) * row_,
                                                          std::size_t(position - at) * row_));
}

void DsparkDrafter::on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) {
    const std::int64_t end = taps_start_ + std::int64_t(taps_.size() / row_);
    // A new sequence, a restored one (a gap), or a trunk gone back behind the rows kept: the
    // rings' past does not belong to it any more.
    if (new_sequence_ || start > end || start < taps_start_) {
        new_sequence_ = false;
        restart(start);
        taps_.clear();
        taps_start_ = start;
    } else if (start < runner_->position()) {
        // The trunk went back behind the rings (not a rejected guess: those never reach them):
        // rebuild them from the rows kept, from as far back as those reach.
        runner_->restart(taps_start_);
    }
    // A call at `start` means the trunk holds every position before it (the rows of a verify
    // call's rejected guesses are replaced here). The rings take them at the next proposal,
    // not now: a plain step then costs the rings nothing (the GPU's extension is a launch and
    // an upload a call), and a long stretch without proposals is taken in one extension.
    taps_.resize(std::size_t(start - taps_start_) * row_);
    taps_.insert(taps_.end(), taps.begin(), taps.begin() + std::ptrdiff_t(n * row_));
    // The rows of the last two windows stay: the rings' next extension needs at most the last
    // window (a ring row depends on its own position alone, so rings more than a window
    // behind restart a window back: the same rows), and a rebuild one window before that.
    // Older rows go two windows at a time: erasing from the front moves every row that stays
    // (6 MiB a window at 0731 geometry), which row by row had cost 0.23 ms a call
    // (tests/bench/dspark_taps_bench.cpp).
    const std::int64_t drop = std::max<std::int64_t>(0, start + std::int64_t(n) - 2 * window_ - taps_start_);
    if (drop >= 2 * window_) {
        taps_.erase(taps_.begin(), taps_.begin() + std::ptrdiff_t(std::size_t(drop) * row_));
        taps_start_ += drop;
    }
}

std::int32_t DsparkDrafter::pick(std::span<const float> logits, std::size_t j) {
    const std::size_t V = logits.size();
    std::span<float> q;
    if (sampler_) q = std::span<float>(q_.host()).subspan(j * V, V);
    return draft_pick(sampler_, logits, q);
}

std::vector<std::int32_t> DsparkDrafter::propose(std::span<const std::int32_t> context) {
    guesses_ = 0;
    q_.clear();
    confidences_.clear();
    if (context.empty()) return {};
    // The trunk has run positions < P; context's last token (the anchor) runs at P.
    const std::int64_t P = runner_->trunk_position(), at = runner_->position();
    const std::int64_t end = taps_start_ + std::int64_t(taps_.size() / row_);
    if (P == 0 || end < P || at > P) return {};
    // The rings take the positions the trunk has confirmed since the last proposal; rings
    // more than a window behind (or behind the rows kept) restart a window back, which
    // writes the rows a continuous build would hold.
    const std::int64_t from = std::max(taps_start_, P - window_);
    if (at < from) runner_->restart(from);
    extend_to(P);

    const std::size_t V = std::size_t(runner_->config().vocab_size);
    if (sampler_) q_.host().resize(max_tokens_ * V);
    runner_->block(context.back());
    std::vector<std::int32_t> guesses;
    std::int32_t prev = context.back();
    float survival = 1.0f;
    std::vector<std::int32_t> chain;
    std::vector<float> chain_c;
    // The whole chain where the runner runs: plain guesses, or guesses drawn from the tempered
    // softmax with this drafter's own draws (q then what they were drawn from). The cut below
    // only truncates it, as the loop's would (each guess follows the one before either way).
    std::vector<float> q;
    bool chained = false;
    if (!sampler_) {
        chained = runner_->greedy(prev, max_tokens_, chain, chain_c);
    } else {
        std::vector<double> draws(max_tokens_);
        for (double& u : draws) u = sampler_->uniform();
        const bool on_device = runner_->chain_q_on_device();
        chained = runner_->sampled(prev, max_tokens_, sampler_->params().temperature, draws, chain, chain_c,
                                   on_device ? nullptr : &q);
        if (chained && !on_device && q.size() != chain.size() * V)
            throw_internal("DsparkDrafter: a sampled chain without its q rows");
        if (chained && on_device) q_.left_on_device([this](std::size_t rows) { return runner_->chain_q(rows); });
    }
    if (chained) {
        for (std::size_t i = 0; i < chain.size(); ++i) {
            confidences_.push_back(chain_c[i]);
            survival *= chain_c[i];
            if (i > 0 && survival < min_survival_) break;
            guesses.push_back(chain[i]);
        }
        if (sampler_ && !q_.on_device())
            std::copy(q.begin(), q.begin() + std::ptrdiff_t(guesses.size() * V), q_.host().begin());
        guesses_ = guesses.size();
        return guesses;
    }
    for (std::size_t i = 0; i < max_tokens_; ++i) {
        const float c = runner_->confidence(i, prev);
        confidences_.push_back(c);
        survival *= c;
        if (i > 0 && survival < min_survival_) break;
        // Guess i's Markov correction follows guess i - 1 (or the anchor): one row at a time.
        const std::vector<float> logits = runner_->guess_logits(i, prev);
        prev = pick(logits, i);
        guesses.push_back(prev);
    }
    guesses_ = guesses.size();
    return guesses;
}

std::span<const float> DsparkDrafter::draft_distribution(std::size_t i) const {
    if (!sampler_ || i >= guesses_) return {};
    return q_.row(i, guesses_);
}

}  // namespace aff
