// The draft distributions (q rows) of a drafter's last proposal, for the MTP and the DSpark
// drafter alike: written on the host by a host-side pick, or left on the device by the runner's
// sampled chain (a GPU verify call reads them there: Drafter::draft_on_device) and copied to
// the host only the first time a row is asked for (the logits path, a host-picking sequence).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace aff {

class DraftRows {
public:
    // The first `rows` rows [rows, V] in host memory (a runner's chain_q).
    using Fetch = std::function<std::vector<float>(std::size_t rows)>;

    explicit DraftRows(std::size_t vocab) : vocab_(vocab) {}
    // A new proposal: its rows are the host's (host()) until left_on_device says otherwise.
    void clear() {
        fetch_ = nullptr;
        fetched_ = false;
    }
    // The host rows, [max guesses, V], for a host-side pick to write.
    std::vector<float>& host() { return rows_; }
    // This proposal's rows are on the device; `fetch` brings them over when asked.
    void left_on_device(Fetch fetch) {
        fetch_ = std::move(fetch);
        fetched_ = false;
    }
    bool on_device() const { return static_cast<bool>(fetch_); }
    // Row i of a proposal of `guesses` rows (i < guesses), fetched once from the device first
    // where they are there (throws internal if the fetch brings the wrong size).
    std::span<const float> row(std::size_t i, std::size_t guesses) const;

private:
    std::size_t vocab_;
    mutable std::vector<float> rows_;
    Fetch fetch_;
    mutable bool fetched_ = false;
};

}  // namespace aff
