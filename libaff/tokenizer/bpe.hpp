// Byte-pair encoding over raw bytes: the Hugging Face BPE model as DeepSeek's
// tokenizer.json configures it (no dropout, no unknown token, no subword prefixes,
// no byte fallback). A word's bytes start as one symbol each; the adjacent pair with the
// lowest merge rank is merged, leftmost first on ties, until no pair has a rank. This is
// the order Hugging Face's priority queue produces, so the ids are the same.
// Loading the vocabulary from JSON is tokenizer.cpp's job; this file only merges.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aff::tokenizer {

using TokenId = std::int32_t;

class BpeModel {
public:
    struct Merge {
        TokenId left, right, result;
    };
    // `byte_tokens[b]` is the id of the one-byte token for byte b; merges in rank order.
    BpeModel(std::vector<TokenId> byte_tokens, const std::vector<Merge>& merges);

    // Appends the ids of one pre-tokenised word (non-empty raw bytes).
    void encode_word(std::string_view word, std::vector<TokenId>& out) const;

    // The two algorithms encode_word chooses between by word length; public so tests can
    // check that they agree.
    void encode_word_scan(std::string_view word, std::vector<TokenId>& out) const;
    void encode_word_queue(std::string_view word, std::vector<TokenId>& out) const;

private:
    struct Slot {
        std::uint64_t key;  // (left << 32 | right) + 1; 0 marks an empty slot
        std::uint32_t rank;
        TokenId result;
    };
    static std::uint64_t pair_key(TokenId a, TokenId b) {
        return (std::uint64_t(std::uint32_t(a)) << 32 | std::uint32_t(b)) + 1;
    }
    const Slot* find(TokenId a, TokenId b) const;

    std::vector<TokenId> byte_tokens_;
    std::vector<Slot> slots_;  // open addressing, power-of-two size
    std::uint64_t mask_ = 0;
};

}  // namespace aff::tokenizer
