// Sequence's defaults (sequence.hpp): no snapshots, no rewind, greedy picks on the host, and
// the one range check every rewind goes through.
#include "libaff/runtime/sequence.hpp"

#include "libaff/core/error.hpp"

namespace aff {

std::vector<std::int32_t> Sequence::forward_ids(std::span<const std::int32_t> tokens, bool all_rows,
                                                std::size_t candidates, const RowSampling* sampling) {
    return row_picks(forward(tokens, all_rows), vocab_size(), candidates, tokens, sampling);
}

std::unique_ptr<SequenceSnapshot> Sequence::snapshot() const {
    throw_unsupported(describe() + ": this sequence cannot snapshot its state");
}

void Sequence::restore(const SequenceSnapshot&) {
    throw_unsupported(describe() + ": this sequence cannot restore a state");
}

void Sequence::set_route_observer(RouteObserver*) {
    throw_unsupported(describe() + ": this sequence records no route traces");
}

void Sequence::set_rewind_depth(std::size_t tokens) {
    if (tokens > 0) throw_unsupported(describe() + ": this sequence cannot rewind");
}

void Sequence::rewind(std::int64_t to) {
    const std::int64_t now = position(), floor = rewind_floor();
    if (to > now)
        throw_usage("rewind to position " + std::to_string(to) + ": the sequence is only at position " +
                    std::to_string(now));
    if (to < floor)
        throw_usage("rewind to position " + std::to_string(to) + " from " + std::to_string(now) +
                    ": this sequence can go back to position " + std::to_string(floor) + " at most (rewind depth " +
                    std::to_string(rewind_depth()) + " tokens)");
    if (to < now) rewind_to(to);
}

void Sequence::rewind_to(std::int64_t) { throw_internal("rewind_to: a sequence without rewind has a floor at its position"); }

}  // namespace aff
