// StopMatcher (stop_matcher.hpp).
#include "libaff/runtime/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace aff {

std::string StopMatcher::push(std::string_view text, bool& hit) {
    hit = false;
    held_.append(text);
    if (stops_.empty()) return std::exchange(held_, {});
    std::size_t first = std::string::npos;
    for (const auto& s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        hit = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Hold back the longest suffix that is a prefix of some stop string.
    std::size_t keep = 0;
    for (const auto& s : stops_) {
        for (std::size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
            if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                keep = k;
                break;
            }
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() { return std::exchange(held_, {}); }

}  // namespace aff
