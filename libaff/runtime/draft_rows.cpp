// DraftRows (draft_rows.hpp).
#include "libaff/runtime/draft_rows.hpp"

#include "libaff/core/error.hpp"

namespace aff {

std::span<const float> DraftRows::row(std::size_t i, std::size_t guesses) const {
    if (fetch_ && !fetched_) {
        rows_ = fetch_(guesses);
        if (rows_.size() != guesses * vocab_) throw_internal("a sampled chain's q rows did not come back");
        fetched_ = true;
    }
    return std::span<const float>(rows_).subspan(i * vocab_, vocab_);
}

}  // namespace aff
