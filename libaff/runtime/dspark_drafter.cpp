// DsparkDrafter (dspark_drafter.hpp): the rings' catch-up over the trunk's confirmed
// positions, the draft block, the sequential Markov correction and the confidence cut.
#include "libaff/runtime/dspark_drafter.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/draft_sampling.hpp"

#include <algorithm>

namespace aff {

DsparkDrafter::DsparkDrafter(const Model& model, CpuSequence& trunk, std::size_t max_tokens, float min_survival)
    : model_(model), trunk_(trunk),
      max_tokens_(std::min(max_tokens, std::size_t(std::max(1, model.config().dspark.block_size)))),
      min_survival_(min_survival),
      row_(model.config().dspark.tap_layers.size() * std::size_t(model.config().hidden_size)),
      window_(model.config().sliding_window) {
    if (!model.has_dspark()) throw_unsupported("the model has no DSpark stages to draft with");
    if (max_tokens == 0) throw_usage("the DSpark drafter needs at least one draft token");
    state_ = model.new_dspark_state();
    trunk_.set_stream_observer(this);
}

DsparkDrafter::~DsparkDrafter() { trunk_.set_stream_observer(nullptr); }

void DsparkDrafter::start(const SamplerParams& sampling) {
    new_sequence_ = true;
    sampler_ = draft_sampler(sampling);
}

void DsparkDrafter::restart(std::int64_t position) {
    state_ = model_.new_dspark_state(position);
    first_ = position;
}

void DsparkDrafter::extend_to(std::int64_t position) {
    if (state_.position >= position) return;
    model_.dspark_extend(state_, std::span<const float>(taps_).subspan(std::size_t(state_.position - taps_start_) * row_,
                                                                       std::size_t(position - state_.position) * row_));
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
    } else if (start < state_.position) {
        // The trunk went back behind the rings (not a rejected guess: those never reach them):
        // rebuild them from the rows kept, from as far back as those reach.
        state_ = model_.new_dspark_state(taps_start_);
    }
    // A call at `start` means the trunk holds every position before it: the rings take them
    // now (the rows of a verify call's rejected guesses were replaced above).
    taps_.resize(std::size_t(start - taps_start_) * row_);
    extend_to(start);
    taps_.insert(taps_.end(), taps.begin(), taps.begin() + std::ptrdiff_t(n * row_));
    // Rows one window before the rings' end stay, for a rebuild; older ones are not needed.
    const std::int64_t drop = std::max<std::int64_t>(0, state_.position - window_ - taps_start_);
    taps_.erase(taps_.begin(), taps_.begin() + std::ptrdiff_t(std::size_t(drop) * row_));
    taps_start_ += drop;
}

std::int32_t DsparkDrafter::pick(std::span<const float> logits, std::size_t j) {
    const std::size_t V = logits.size();
    std::span<float> q;
    if (sampler_) q = std::span<float>(q_).subspan(j * V, V);
    return draft_pick(sampler_, logits, q);
}

std::vector<std::int32_t> DsparkDrafter::propose(std::span<const std::int32_t> context) {
    guesses_ = 0;
    confidences_.clear();
    if (context.empty()) return {};
    // The trunk has run positions < P; context's last token (the anchor) runs at P.
    const std::int64_t P = trunk_.position();
    const std::int64_t end = taps_start_ + std::int64_t(taps_.size() / row_);
    if (P == 0 || end < P || state_.position > P || state_.position < taps_start_) return {};
    // The rings take the positions the trunk has confirmed since its last call (the accepted
    // tokens of the last verify call, or the whole of it).
    extend_to(P);

    const std::size_t V = std::size_t(model_.config().vocab_size), D = std::size_t(model_.config().hidden_size);
    if (sampler_) q_.resize(max_tokens_ * V);
    DsparkBlock block = model_.dspark_block(state_, context.back());
    std::vector<std::int32_t> guesses;
    std::int32_t prev = context.back();
    float survival = 1.0f;
    for (std::size_t i = 0; i < max_tokens_; ++i) {
        const std::span<float> logits = std::span<float>(block.logits).subspan(i * V, V);
        const float c = model_.dspark_confidence(std::span<const float>(block.y).subspan(i * D, D), prev);
        confidences_.push_back(c);
        survival *= c;
        if (i > 0 && survival < min_survival_) break;
        model_.dspark_markov(prev, logits);
        prev = pick(logits, i);
        guesses.push_back(prev);
    }
    guesses_ = guesses.size();
    return guesses;
}

std::span<const float> DsparkDrafter::draft_distribution(std::size_t i) const {
    if (!sampler_ || i >= guesses_) return {};
    const std::size_t V = std::size_t(model_.config().vocab_size);
    return std::span<const float>(q_).subspan(i * V, V);
}

}  // namespace aff
