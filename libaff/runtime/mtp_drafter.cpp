// MtpDrafter (mtp_drafter.hpp): the MTP layer's catch-up over the trunk's positions, its
// chained guesses, and the ring put back after them, over either backend's runner.
#include "libaff/runtime/mtp_drafter.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/cpu_mtp_runner.hpp"
#include "libaff/runtime/draft_sampling.hpp"

#include <algorithm>

namespace aff {

namespace {
std::unique_ptr<MtpRunner> checked(std::unique_ptr<MtpRunner> runner, std::size_t max_tokens) {
    if (!runner) throw_internal("MtpDrafter: no runner");
    if (max_tokens == 0) throw_usage("the MTP drafter needs at least one draft token");
    return runner;
}
}  // namespace

MtpDrafter::MtpDrafter(std::unique_ptr<MtpRunner> runner, std::size_t max_tokens)
    : runner_(checked(std::move(runner), max_tokens)), max_tokens_(max_tokens),
      window_(std::int64_t(runner_->window())), q_(runner_->vocab_size()) {
    runner_->listen(this);
}

MtpDrafter::MtpDrafter(const Model& model, CpuSequence& trunk, std::size_t max_tokens)
    : MtpDrafter(std::make_unique<CpuMtpRunner>(model, trunk), max_tokens) {}

MtpDrafter::~MtpDrafter() { runner_->listen(nullptr); }

void MtpDrafter::start(const SamplerParams& sampling) {
    new_sequence_ = true;
    sampler_ = draft_sampler(sampling);  // draws of its own, not the target's; none at temperature 0
}

void MtpDrafter::on_trunk_call(std::int64_t start, std::size_t n) {
    // A new sequence, a restored one, or a trunk gone back behind what the MTP layer has
    // consumed: the MTP layer's past does not belong to it any more.
    if (new_sequence_ || start > streams_end_ || start < runner_->position()) {
        new_sequence_ = false;
        runner_->restart(start);
        streams_start_ = streams_end_ = start;
    }
    // Rows from `start` on are replaced (a rewind dropped them). Only the last window is
    // kept: a ring row depends only on its own position's inputs, so the last W positions
    // rebuild the whole ring exactly (the next proposal then restarts the MTP layer there),
    // and the store stays bounded while no proposals come (DraftGate's windows without
    // drafts); rows the MTP layer has consumed are no longer needed.
    streams_start_ = std::min(streams_start_, start);
    streams_end_ = start + std::int64_t(n);
    const std::size_t kept = std::min<std::size_t>(n, std::size_t(window_));
    runner_->keep(streams_end_ - std::int64_t(kept), n - kept, kept);
    streams_start_ = std::max({streams_start_, runner_->position(), streams_end_ - window_});
}

std::int32_t MtpDrafter::pick(std::span<const float> logits, std::size_t j) {
    std::span<float> q;
    if (sampler_) q = std::span<float>(q_.host()).subspan(j * logits.size(), logits.size());
    return draft_pick(sampler_, logits, q);
}

std::vector<std::int32_t> MtpDrafter::propose(std::span<const std::int32_t> context) {
    guesses_ = 0;
    q_.clear();
    if (context.empty()) return {};
    // The trunk has run positions < P; context's last token runs at P, so context[i] is the
    // token at position base + i.
    const std::int64_t P = runner_->trunk_position();
    const std::int64_t base = P - std::int64_t(context.size() - 1);
    if (streams_end_ < P || P == 0) return {};
    // The MTP layer runs at q on (H[q], token at q + 1): from where it stands, or where
    // both are known.
    const std::int64_t first = std::max({runner_->position(), base - 1, streams_start_});
    if (first != runner_->position()) runner_->restart(first);
    if (first >= P) return {};
    const std::size_t n = std::size_t(P - first);
    const std::size_t V = runner_->vocab_size();
    if (sampler_) q_.host().resize(max_tokens_ * V);
    const std::span<const std::int32_t> next = context.subspan(std::size_t(first + 1 - base), n);
    std::vector<std::int32_t> chained;
    if (!sampler_ && runner_->greedy_chain(next, max_tokens_, chained)) {
        // Plain guesses, picked where the runner runs: the same chain as the loop below.
        guesses_ = chained.size();
        return chained;
    }
    if (sampler_) {
        // Drawn where the runner runs, from the tempered softmax with this drafter's own draws;
        // q_ is then what they were drawn from (not the sampler's filtered distribution).
        std::vector<double> draws(max_tokens_);
        for (double& u : draws) u = sampler_->uniform();
        const bool on_device = runner_->chain_q_on_device();
        if (runner_->sampled_chain(next, max_tokens_, sampler_->params().temperature, draws, chained,
                                   on_device ? nullptr : &q_.host())) {
            if (!on_device && q_.host().size() != chained.size() * V)
                throw_internal("MtpDrafter: a sampled chain without its q rows");
            if (on_device) q_.left_on_device([this](std::size_t rows) { return runner_->chain_q(rows); });
            guesses_ = chained.size();
            return chained;
        }
    }
    std::vector<float> logits = runner_->run(next);
    std::vector<std::int32_t> guesses{pick(logits, 0)};
    if (max_tokens_ > 1) {
        // Further guesses chain the layer on its own streams; the ring rows they write are
        // the trunk's to decide, so the ring is put back after them.
        runner_->save_ring();
        for (std::size_t j = 1; j < max_tokens_; ++j) {
            logits = runner_->chain(guesses.back());
            guesses.push_back(pick(logits, j));
        }
        runner_->restore_ring(P);
    }
    guesses_ = guesses.size();
    return guesses;
}

std::span<const float> MtpDrafter::draft_distribution(std::size_t i) const {
    if (!sampler_ || i >= guesses_) return {};
    return q_.row(i, guesses_);
}

}  // namespace aff
