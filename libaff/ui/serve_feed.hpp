// aff-serve's requests onto the live view's board: the server's RequestObserver
// (libaff/serve/request_observer.hpp) implemented by writing StatsBoard rows, the Drafts
// panel's acceptance from the same counts /metrics renders (aff_draft_*: verify calls, draft
// tokens and accepted tokens, summed over the finished generations and the running one, as
// its verify calls go), and the Tiers panel from the engine's sequence between its forward
// calls (TierFeed).
#pragma once

#include "libaff/serve/request_observer.hpp"
#include "libaff/ui/stats.hpp"
#include "libaff/ui/tier_feed.hpp"

#include <cstdint>
#include <map>
#include <mutex>

namespace aff::ui {

class ServeFeed final : public serve::RequestObserver {
public:
    explicit ServeFeed(StatsBoard& board) : board_(board), tiers_(board) {}
    std::uint64_t queued(std::size_t prompt_tokens) override { return board_.add_request(prompt_tokens); }
    void started(std::uint64_t id) override { board_.start_request(id); }
    void token(std::uint64_t id, std::size_t cached_tokens) override {
        board_.set_cached(id, cached_tokens);
        board_.add_token(id);
    }
    void verified(std::uint64_t id, const GenerateStats& so_far) override;
    void dispatched(std::uint64_t, const Sequence& sequence) override { tiers_.between_calls(sequence); }
    void finished(std::uint64_t id) override;

    // Once the model is loaded, before any request: whether generations draft, and the
    // sequence's tiers as loaded.
    void engine_ready(bool drafting, const Sequence& sequence);

private:
    struct Drafts {
        std::uint64_t verify_calls = 0, drafted = 0, accepted = 0;
    };
    void publish_drafts();  // under mutex_

    StatsBoard& board_;
    TierFeed tiers_;
    std::mutex mutex_;
    bool drafting_ = false;
    Drafts done_;                              // finished generations
    std::map<std::uint64_t, Drafts> running_;  // the running ones, by request
};

// The counts /metrics sums for one generation's statistics (Metrics::add_drafts).
std::uint64_t drafted_tokens(const GenerateStats& stats);
std::uint64_t accepted_tokens(const GenerateStats& stats);

}  // namespace aff::ui
