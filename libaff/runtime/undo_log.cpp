// UndoLogSequence (undo_log.hpp): the log of undo records and the rewind over it.
#include "libaff/runtime/undo_log.hpp"

#include "libaff/runtime/greedy_pick.hpp"

#include <algorithm>

namespace aff {

template <class Call>
auto UndoLogSequence::logged(std::span<const std::int32_t> tokens, Call call) {
    if (depth_ == 0 || tokens.empty()) return call();
    Chunk chunk{position(), {tokens.begin(), tokens.end()}, take_undo(tokens)};
    auto out = call();
    log_.push_back(std::move(chunk));
    trim();
    return out;
}

std::vector<float> UndoLogSequence::forward(std::span<const std::int32_t> tokens, bool all_logits) {
    return logged(tokens, [&] { return run(tokens, all_logits); });
}

std::vector<std::int32_t> UndoLogSequence::forward_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                                       std::size_t candidates, const RowSampling* sampling) {
    return logged(tokens, [&] { return run_ids(tokens, all_rows, candidates, sampling); });
}

std::vector<std::int32_t> UndoLogSequence::run_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                                   std::size_t candidates, const RowSampling* sampling) {
    return row_picks(run(tokens, all_rows), vocab_size(), candidates, tokens, sampling);
}

void UndoLogSequence::set_rewind_depth(std::size_t tokens) {
    depth_ = tokens;
    trim();
}

std::int64_t UndoLogSequence::rewind_floor() const {
    const std::int64_t now = position();
    if (log_.empty()) return now;
    return std::max(log_.front().start, now - static_cast<std::int64_t>(depth_));
}

void UndoLogSequence::trim() {
    const std::int64_t keep_from = position() - static_cast<std::int64_t>(depth_);
    while (!log_.empty() &&
           (depth_ == 0 || log_.front().start + static_cast<std::int64_t>(log_.front().tokens.size()) <= keep_from)) {
        recycle(std::move(log_.front().undo));
        log_.pop_front();
    }
}

void UndoLogSequence::rewind_to(std::int64_t to) {
    // Sequence::rewind checked rewind_floor() <= to < position(): the log covers `to`.
    while (!log_.empty() && log_.back().start >= to) {
        apply_undo(*log_.back().undo);
        recycle(std::move(log_.back().undo));
        log_.pop_back();
    }
    if (position() == to) return;
    Chunk straddling = std::move(log_.back());
    log_.pop_back();
    apply_undo(*straddling.undo);
    recycle(std::move(straddling.undo));
    forward(std::span<const std::int32_t>(straddling.tokens).first(static_cast<std::size_t>(to - straddling.start)), false);
}

}  // namespace aff
