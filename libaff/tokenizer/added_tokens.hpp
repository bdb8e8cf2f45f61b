// Finds added tokens (tokenizer.json "added_tokens") in text before pre-tokenisation, the
// way Hugging Face's AddedVocabulary does: leftmost-longest matching (its Aho-Corasick
// MatchKind::LeftmostLongest), tokens with "normalized": false first on the whole text,
// then tokens with "normalized": true inside the gaps (DeepSeek's normalizer is the
// identity, so normalising the gaps changes nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aff::tokenizer {

class AddedTokenMatcher {
public:
    void add(std::string_view content, std::int32_t id);
    bool empty() const { return nodes_.size() <= 1; }

    // Leftmost-longest match in text[from, size): true with its position and token id.
    bool find(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end, std::int32_t& id) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, std::uint32_t>> children;  // sorted by byte
        std::int32_t id = -1;
    };
    std::uint32_t child(std::uint32_t node, unsigned char b) const;
    std::vector<Node> nodes_{1};
    bool first_byte_[256] = {};
};

}  // namespace aff::tokenizer
