// MtpDrafter (mtp_drafter.hpp): the MTP layer's catch-up over the trunk's positions, its
// chained guesses, and the ring put back after them.
#include "libaff/runtime/mtp_drafter.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>

namespace aff {

MtpDrafter::MtpDrafter(const Model& model, CpuSequence& trunk, std::size_t max_tokens)
    : model_(model), trunk_(trunk), max_tokens_(max_tokens),
      row_(std::size_t(model.config().hc_mult) * std::size_t(model.config().hidden_size)),
      window_(std::size_t(model.config().sliding_window)) {
    if (!model.has_mtp()) throw_unsupported("the model has no MTP layer to draft with");
    if (max_tokens == 0) throw_usage("the MTP drafter needs at least one draft token");
    state_ = model.new_state();
    state_.layers.clear();  // the trunk's state is the sequence's, not ours
    empty_mtp_ = state_.mtp;
    trunk_.set_stream_observer(this);
}

MtpDrafter::~MtpDrafter() { trunk_.set_stream_observer(nullptr); }

void MtpDrafter::start(const SamplerParams& sampling) {
    new_sequence_ = true;
    sampler_.reset();
    if (sampling.temperature > 0.0f) {
        SamplerParams own = sampling;
        own.seed ^= 0x9e3779b97f4a7c15ull;  // draws of their own, not the target's
        sampler_.emplace(own);
    }
}

void MtpDrafter::restart(std::int64_t position) {
    state_.mtp = empty_mtp_;
    state_.mtp_position = position;
}

void MtpDrafter::on_streams(std::int64_t start, std::size_t n, std::span<const float> streams) {
    const std::int64_t end = streams_start_ + std::int64_t(streams_.size() / row_);
    // A new sequence, a restored one, or a trunk gone back behind what the MTP layer has
    // consumed: the MTP layer's past does not belong to it any more.
    if (new_sequence_ || start > end || start < state_.mtp_position) {
        new_sequence_ = false;
        restart(start);
        streams_.clear();
        streams_start_ = start;
    }
    // Rows from `start` on are replaced (a rewind dropped them); rows the MTP layer has
    // consumed are no longer needed.
    streams_.resize(std::size_t(start - streams_start_) * row_);
    streams_.insert(streams_.end(), streams.begin(), streams.begin() + std::ptrdiff_t(n * row_));
    // Rows older than one window are dropped too: a ring row depends only on its own
    // position's inputs, so the last W positions rebuild the whole ring exactly (the next
    // proposal then restarts the MTP layer there), and the buffer stays bounded while no
    // proposals come (DraftGate's windows without drafts).
    const std::int64_t rows = std::int64_t(streams_.size() / row_);
    const std::int64_t drop =
        std::max<std::int64_t>({0, state_.mtp_position - streams_start_, rows - std::int64_t(window_)});
    streams_.erase(streams_.begin(), streams_.begin() + std::ptrdiff_t(std::size_t(drop) * row_));
    streams_start_ += drop;
}

std::int32_t MtpDrafter::pick(std::span<const float> logits, std::size_t j) {
    if (!sampler_) {
        std::int32_t best = 0;
        for (std::size_t i = 1; i < logits.size(); ++i)
            if (logits[i] > logits[std::size_t(best)]) best = std::int32_t(i);  // ties: the lower id
        return best;
    }
    std::vector<float> q;
    sampler_->distribution(logits, q);
    std::copy(q.begin(), q.end(), q_.begin() + std::ptrdiff_t(j * logits.size()));
    return sampler_->sample(logits);
}

std::vector<std::int32_t> MtpDrafter::propose(std::span<const std::int32_t> context) {
    guesses_ = 0;
    if (context.empty()) return {};
    // The trunk has run positions < P; context's last token runs at P, so context[i] is the
    // token at position base + i.
    const std::int64_t P = trunk_.position();
    const std::int64_t base = P - std::int64_t(context.size() - 1);
    const std::int64_t end = streams_start_ + std::int64_t(streams_.size() / row_);
    if (end < P || P == 0) return {};
    // The MTP layer runs at q on (H[q], token at q + 1): from where it stands, or where
    // both are known.
    const std::int64_t first = std::max({state_.mtp_position, base - 1, streams_start_});
    if (first != state_.mtp_position) restart(first);
    if (first >= P) return {};
    const std::size_t n = std::size_t(P - first);
    const std::size_t V = std::size_t(model_.config().vocab_size);
    if (sampler_) q_.resize(max_tokens_ * V);
    std::vector<float> out_streams;
    std::vector<float> logits = model_.mtp_forward(
        state_, std::span<const float>(streams_).subspan(std::size_t(first - streams_start_) * row_, n * row_),
        context.subspan(std::size_t(first + 1 - base), n), false, &out_streams);
    std::vector<std::int32_t> guesses{pick(logits, 0)};
    if (max_tokens_ > 1) {
        // Further guesses chain the layer on its own streams; the ring rows they write are
        // the trunk's to decide, so the ring is put back after them.
        LayerState& ring_state = state_.mtp[0];
        ring_copy_ = ring_state.ring;
        std::vector<float> h(out_streams.end() - std::ptrdiff_t(row_), out_streams.end());
        for (std::size_t j = 1; j < max_tokens_; ++j) {
            const std::int32_t last[1] = {guesses.back()};
            logits = model_.mtp_forward(state_, h, last, false, &h);
            guesses.push_back(pick(logits, j));
        }
        ring_state.ring.swap(ring_copy_);
        state_.mtp_position = P;
    }
    guesses_ = guesses.size();
    return guesses;
}

std::span<const float> MtpDrafter::draft_distribution(std::size_t i) const {
    if (!sampler_ || i >= guesses_) return {};
    const std::size_t V = std::size_t(model_.config().vocab_size);
    return std::span<const float>(q_).subspan(i * V, V);
}

}  // namespace aff
