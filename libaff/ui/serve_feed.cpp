// aff-serve's board feed (see serve_feed.hpp).
#include "libaff/ui/serve_feed.hpp"

#include <numeric>

namespace aff::ui {

std::uint64_t drafted_tokens(const GenerateStats& s) {
    return std::accumulate(s.drafted_at.begin(), s.drafted_at.end(), std::uint64_t(0));
}

std::uint64_t accepted_tokens(const GenerateStats& s) {
    return std::accumulate(s.accepted_at.begin(), s.accepted_at.end(), std::uint64_t(0));
}

void ServeFeed::engine_ready(bool drafting, const Sequence& sequence) {
    {
        std::lock_guard lock(mutex_);
        drafting_ = drafting;
        publish_drafts();
    }
    tiers_.publish(sequence.expert_tiers(), sequence.on_gpu());
}

void ServeFeed::verified(std::uint64_t id, const GenerateStats& so_far) {
    std::lock_guard lock(mutex_);
    drafting_ = true;
    running_[id] = {so_far.verify_calls, drafted_tokens(so_far), accepted_tokens(so_far)};
    publish_drafts();
}

void ServeFeed::finished(std::uint64_t id) {
    board_.finish_request(id);
    tiers_.idle();
    std::lock_guard lock(mutex_);
    if (auto it = running_.find(id); it != running_.end()) {
        done_.verify_calls += it->second.verify_calls;
        done_.drafted += it->second.drafted;
        done_.accepted += it->second.accepted;
        running_.erase(it);
    }
}

void ServeFeed::publish_drafts() {
    Drafts all = done_;
    for (const auto& [id, d] : running_) {
        all.verify_calls += d.verify_calls;
        all.drafted += d.drafted;
        all.accepted += d.accepted;
    }
    DraftFigures f;
    f.drafting = drafting_;
    f.verify_calls = all.verify_calls;
    f.acceptance_rate = all.drafted ? double(all.accepted) / double(all.drafted) : 0.0;
    f.mean_accepted_length = all.verify_calls ? double(all.accepted) / double(all.verify_calls) : 0.0;
    board_.publish_drafts(f);
}

}  // namespace aff::ui
