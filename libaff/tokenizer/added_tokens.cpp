// A byte trie of the added tokens (see added_tokens.hpp). DeepSeek's 800-odd added tokens
// all start with '<', so the scan skips almost every position on one table lookup.
#include "libaff/tokenizer/added_tokens.hpp"

#include <algorithm>

namespace aff::tokenizer {

std::uint32_t AddedTokenMatcher::child(std::uint32_t node, unsigned char b) const {
    const auto& ch = nodes_[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), b, [](const auto& p, unsigned char v) { return p.first < v; });
    return it != ch.end() && it->first == b ? it->second : 0;
}

void AddedTokenMatcher::add(std::string_view content, std::int32_t id) {
    if (content.empty()) return;
    std::uint32_t node = 0;
    for (unsigned char b : content) {
        std::uint32_t next = child(node, b);
        if (next == 0) {
            next = static_cast<std::uint32_t>(nodes_.size());
            nodes_.emplace_back();
            auto& ch = nodes_[node].children;
            auto it = std::lower_bound(ch.begin(), ch.end(), b, [](const auto& p, unsigned char v) { return p.first < v; });
            ch.insert(it, {b, next});
        }
        node = next;
    }
    nodes_[node].id = id;  // a repeated content keeps the last id, as a map insert would
    first_byte_[static_cast<unsigned char>(content[0])] = true;
}

bool AddedTokenMatcher::find(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end,
                             std::int32_t& id) const {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    for (std::size_t i = from; i < text.size(); ++i) {
        if (!first_byte_[p[i]]) continue;
        std::uint32_t node = 0;
        std::size_t best_end = 0;
        std::int32_t best_id = -1;
        for (std::size_t j = i; j < text.size(); ++j) {
            node = child(node, p[j]);
            if (node == 0) break;
            if (nodes_[node].id >= 0) {
                best_end = j + 1;
                best_id = nodes_[node].id;
            }
        }
        if (best_id >= 0) {
            begin = i;
            end = best_end;
            id = best_id;
            return true;
        }
    }
    return false;
}

}  // namespace aff::tokenizer
