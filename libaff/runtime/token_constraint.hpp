// Constrained sampling: before each token is sampled, the logits of tokens that cannot
// continue the allowed text are set to -infinity, so the sampler can only pick tokens
// the constraint allows; then the chosen token is fed to it. Two constraints:
//   JsonConstraint   the reply is one JSON value of a JsonGrammar (json_grammar.hpp):
//                    response_format json_object and json_schema;
//   PrefixConstraint the reply starts with one of a few fixed texts, then is free: a tool
//                    call forced by tool_choice "required" or a named function (the texts
//                    open the chat encoding's tool-call block and name the function).
// Both may wait for a marker first (a thinking model's "</think>"), leaving the reasoning
// free. The vocabulary's bytes are indexed once per model (TokenBytes) and the grammar
// compiled once per request; a mask probes each first byte and each two-byte prefix in
// use once, then walks only the tokens under an accepted prefix; inside a string it takes
// the tokens of plain bytes from a list and walks only the others
// (tests/bench/grammar_mask_bench.cpp measures it).
#pragma once

#include "libaff/runtime/json_grammar.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {

// Every token's bytes as the model writes them, and the end-of-turn tokens.
struct TokenBytes {
    TokenBytes(std::vector<std::string> bytes, std::vector<std::int32_t> end_tokens);
    std::vector<std::string> bytes;  // by id; empty for ids without text
    std::vector<std::int32_t> end_tokens;
    std::vector<bool> is_end;
    // Non-end tokens by their first two bytes (one-byte tokens apart), so that a mask
    // probes each prefix once and walks only the tokens under an accepted one.
    std::array<std::vector<std::int32_t>, 256> single;           // one-byte tokens by that byte
    std::array<std::vector<std::uint8_t>, 256> second_bytes;     // second bytes in use under a first
    std::vector<std::vector<std::int32_t>> by_first_two;         // [first * 256 + second]
    std::vector<bool> plain;  // no '"', '\\' or control byte: leaves a JSON string's state as it is
    std::vector<std::int32_t> plain_ids;     // the ids where plain is set
    std::vector<std::int32_t> nonplain_ids;  // the other non-end ids with text
};

class TokenConstraint {
public:
    TokenConstraint(std::shared_ptr<const TokenBytes> vocabulary, std::string start_after);
    virtual ~TokenConstraint() = default;
    // Sets the logits of disallowed tokens to -infinity (ids past the vocabulary too).
    void mask(std::span<float> logits);
    // The token the sampler chose.
    void accept(std::int32_t token);

protected:
    virtual void mask_active(std::span<float> logits) = 0;
    virtual void accept_active(std::int32_t token) = 0;
    void allow_only(std::span<float> logits, const std::vector<std::uint8_t>& allowed) const;
    std::shared_ptr<const TokenBytes> vocabulary_;

private:
    std::string start_after_;  // empty: active from the first token
    std::string seen_;         // text before the marker (its tail)
};

class JsonConstraint final : public TokenConstraint {
public:
    JsonConstraint(std::shared_ptr<const TokenBytes> vocabulary, std::shared_ptr<const JsonGrammar> grammar,
                   std::string start_after = {});
    const JsonMatcher& matcher() const { return matcher_; }

private:
    void mask_active(std::span<float> logits) override;
    void accept_active(std::int32_t token) override;
    std::shared_ptr<const JsonGrammar> grammar_;
    JsonMatcher matcher_;
    bool dead_ = false;  // a token the mask did not allow was fed: only an end token now
    std::vector<std::uint8_t> allowed_;
};

class PrefixConstraint final : public TokenConstraint {
public:
    PrefixConstraint(std::shared_ptr<const TokenBytes> vocabulary, std::vector<std::string> prefixes,
                     std::string start_after = {});
    bool done() const { return done_; }

private:
    void mask_active(std::span<float> logits) override;
    void accept_active(std::int32_t token) override;
    std::vector<std::string> prefixes_;
    std::size_t matched_ = 0;  // bytes of the prefix written so far (all candidates share them)
    bool done_ = false;
    std::vector<std::uint8_t> allowed_;
};

}  // namespace aff
