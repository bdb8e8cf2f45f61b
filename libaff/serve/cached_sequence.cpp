// PrefixCachedSequence (cached_sequence.hpp): the prompt path through the prefix cache, the
// end-of-generation snapshot and the logits mask.
#include "libaff/serve/cached_sequence.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/units.hpp"
#include "libaff/runtime/greedy_pick.hpp"

#include <algorithm>
#include <limits>

namespace aff::serve {
namespace {

// A sequence snapshot as the prefix cache holds it.
class SnapshotEntry final : public CachedState {
public:
    explicit SnapshotEntry(std::unique_ptr<SequenceSnapshot> s) : snapshot(std::move(s)) {}
    std::size_t bytes() const override { return snapshot->bytes(); }
    std::unique_ptr<SequenceSnapshot> snapshot;
};

}  // namespace

PrefixCachedSequence::PrefixCachedSequence(std::unique_ptr<Sequence> backend, std::vector<bool> has_text,
                                           std::int32_t assistant_token)
    : backend_(std::move(backend)), has_text_(std::move(has_text)), assistant_token_(assistant_token) {
    if (!backend_) throw_internal("PrefixCachedSequence: no backend");
    if (has_text_.size() != backend_->vocab_size()) throw_internal("PrefixCachedSequence: has_text is not one per id");
    for (std::size_t i = 0; i < has_text_.size(); ++i)
        if (!has_text_[i]) no_text_.push_back(std::int32_t(i));
    const std::size_t first_without = std::size_t(std::find(has_text_.begin(), has_text_.end(), false) - has_text_.begin());
    if (std::find(has_text_.begin() + std::ptrdiff_t(first_without), has_text_.end(), true) == has_text_.end())
        text_prefix_ = first_without;
}

void PrefixCachedSequence::set_prefix_cache(std::size_t bytes) {
    sequence_valid_ = false;
    const bool usable = backend_->can_snapshot();
    cache_ = PrefixCache(usable ? bytes : 0);
    cache_description_ = bytes == 0 ? "prefix cache off"
                         : usable   ? "prefix cache " + format_bytes(bytes)
                                    : "no prefix cache: this backend cannot snapshot its state";
    publish_stats();
}

void PrefixCachedSequence::reset() {
    backend_->reset();
    fresh_ = true;
    next_phase_ = trace::Phase::decode;
    cached_tokens_ = 0;
    sequence_valid_ = false;
    sequence_.clear();
}

void PrefixCachedSequence::set_route_recorder(trace::RouteRecorder* recorder) {
    backend_->set_route_observer(recorder);
    recorder_ = recorder;
}

template <class Run>
auto PrefixCachedSequence::tracked(std::span<const std::int32_t> tokens, Run run) {
    const bool prompt = fresh_;
    if (recorder_) recorder_->begin(trace_sequence_, prompt ? trace::Phase::prefill : next_phase_);
    next_phase_ = trace::Phase::decode;
    fresh_ = false;
    sequence_valid_ = false;
    auto out = run(prompt);
    sequence_.insert(sequence_.end(), tokens.begin(), tokens.end());
    sequence_valid_ = true;
    if (std::optional<TierStats> t = backend_->tier_stats()) {  // a few µs a call: the table's counts
        std::lock_guard lock(stats_mutex_);
        tier_stats_ = *t;
    }
    return out;
}

std::vector<float> PrefixCachedSequence::forward(std::span<const std::int32_t> tokens, bool all_logits) {
    return mask(tracked(tokens, [&](bool prompt) {
        if (prompt && tokens.size() >= 2 && !all_logits) return run_prompt(tokens);
        if (prompt) cached_tokens_ = 0;
        return backend_->forward(tokens, all_logits);
    }));
}

std::vector<std::int32_t> PrefixCachedSequence::forward_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                                            std::size_t candidates, const RowSampling* sampling) {
    // Masked ids are never picked (-infinity never wins a greedy pick and has no mass in a
    // draw), so a masked tail is a cut.
    if (fresh_ || text_prefix_ == 0) return row_picks(forward(tokens, all_rows), vocab_size(), candidates, tokens, sampling);
    return tracked(tokens, [&](bool) {
        return backend_->forward_ids(tokens, all_rows, std::min(candidates, text_prefix_), sampling);
    });
}

std::optional<TierStats> PrefixCachedSequence::published_tier_stats() const {
    std::lock_guard lock(stats_mutex_);
    return tier_stats_;
}

std::vector<float> PrefixCachedSequence::run_prompt(std::span<const std::int32_t> tokens) {
    // The prompt runs as two calls split at snapshot_point, with the cache or without: the
    // GPU's logits depend on how tokens are split into calls (prefill GEMMs from 5 tokens up),
    // and this way a server without the cache computes a prompt as one with it does on a miss.
    const std::size_t head = snapshot_point(tokens);
    const PrefixCache::Match hit = cache_.enabled() ? cache_.find(tokens, tokens.size() - 1) : PrefixCache::Match{};
    cached_tokens_ = 0;
    if (hit.state) {
        backend_->restore(*static_cast<const SnapshotEntry&>(*hit.state).snapshot);
        cached_tokens_ = hit.tokens;
    }
    std::size_t at = hit.tokens;
    if (head > at) {
        backend_->forward(tokens.subspan(at, head - at), false);
        if (cache_.enabled()) keep_snapshot(tokens.first(head));
        at = head;
    }
    std::vector<float> logits = backend_->forward(tokens.subspan(at), false);
    if (cache_.enabled()) publish_stats();
    return logits;
}

void PrefixCachedSequence::rewind_to(std::int64_t position) {
    sequence_valid_ = false;
    if (recorder_) recorder_->begin(trace_sequence_, trace::Phase::replay);  // a rewind into a call runs part of it again
    backend_->rewind(position);
    next_phase_ = trace::Phase::decode;
    sequence_.resize(static_cast<std::size_t>(position));
    sequence_valid_ = true;
}

std::vector<float> PrefixCachedSequence::mask(std::vector<float> logits) const {
    // The few ids without text, row by row (not a test of every entry: rows are 129 280 long).
    const std::size_t V = has_text_.size();
    for (std::size_t row = 0; row + V <= logits.size(); row += V)
        for (std::int32_t id : no_text_) logits[row + std::size_t(id)] = -std::numeric_limits<float>::infinity();
    return logits;
}

std::size_t PrefixCachedSequence::snapshot_point(std::span<const std::int32_t> tokens) const {
    // Rendered chats end in <｜Assistant｜> and then <think> or </think> (plain text to this
    // tokenizer). The next turn's prompt keeps everything up to that <｜Assistant｜> but, in
    // thinking mode, writes </think> and the answer where this prompt opened <think>: the
    // state just after the last <｜Assistant｜> is the one the next turn can use. Only the
    // template's tail counts (the marker and a think tag of 3 tokens, with room to spare): a
    // marker deep inside a raw completion prompt would put the snapshot far from its end.
    constexpr std::size_t kTail = 8;
    const std::size_t n = tokens.size();
    for (std::size_t i = n - 1; i-- > 0 && n - i <= kTail;)
        if (tokens[i] == assistant_token_) return i + 1;
    return n - 1;
}

void PrefixCachedSequence::end_sequence() {
    if (recorder_) {
        recorder_->publish();
        ++trace_sequence_;
    }
    if (!cache_.enabled() || !sequence_valid_ || sequence_.empty()) return;
    keep_snapshot(sequence_);
    publish_stats();
}

void PrefixCachedSequence::keep_snapshot(std::span<const std::int32_t> tokens) {
    if (cache_.contains(tokens)) return;
    cache_.insert({tokens.begin(), tokens.end()}, std::make_shared<SnapshotEntry>(backend_->snapshot()));
}

void PrefixCachedSequence::publish_stats() {
    std::lock_guard lock(stats_mutex_);
    if (cache_.enabled()) stats_ = cache_.stats();
    else stats_.reset();
}

std::optional<PrefixCacheStats> PrefixCachedSequence::prefix_cache_stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
}

}  // namespace aff::serve
