// aff-serve's requests onto the live view's board: the server's RequestObserver
// (libaff/serve/request_observer.hpp) implemented by writing StatsBoard rows.
#pragma once

#include "libaff/serve/request_observer.hpp"
#include "libaff/ui/stats.hpp"

namespace aff::ui {

class ServeFeed final : public serve::RequestObserver {
public:
    explicit ServeFeed(StatsBoard& board) : board_(board) {}
    std::uint64_t queued(std::size_t prompt_tokens) override { return board_.add_request(prompt_tokens); }
    void started(std::uint64_t id) override { board_.start_request(id); }
    void token(std::uint64_t id, std::size_t cached_tokens) override {
        board_.set_cached(id, cached_tokens);
        board_.add_token(id);
    }
    void finished(std::uint64_t id) override { board_.finish_request(id); }

private:
    StatsBoard& board_;
};

}  // namespace aff::ui
