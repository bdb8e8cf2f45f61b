// A Hugging Face tokenizer.json loaded for encoding and decoding, giving the same ids as
// Hugging Face `tokenizers` for the configuration DeepSeek ships: byte-level BPE behind a
// Sequence of Split regexes, added tokens matched before pre-tokenisation, ByteLevel
// decoder. Any tokenizer.json feature outside that set is refused at load with an error
// naming the field, never approximated. Chat templating is chat_render.hpp's job.
//
// Defined behaviour beyond Hugging Face (whose Python API only accepts str):
//  * Input that is not valid UTF-8 is repaired before encoding: every maximal ill-formed
//    subpart becomes U+FFFD (as Python's bytes.decode("utf-8", "replace") does). So
//    encode(bytes) == HF encode(bytes.decode("utf-8", "replace")). Nothing is dropped
//    silently; the replacement characters are encoded like any other text.
//  * encode never adds BOS/EOS (Hugging Face's add_special_tokens=False); the chat
//    renderer writes BOS into the prompt text.
//  * decode of an id the tokenizer does not know throws (Hugging Face skips it).
// Known difference: the regexes' Unicode classes come from PCRE2's tables (Debian 12:
// PCRE2 10.42, Unicode 14.0) where Hugging Face's Oniguruma has Unicode 15.0. Characters
// first assigned in Unicode 15 (e.g. U+1FAE8 🫨, U+1FA77 🩷, Kawi, CJK extension H) are
// unassigned to PCRE2 and can split differently next to spaces and punctuation, giving
// other ids than Hugging Face. Everything up to Unicode 14 matches (tests/data/tokenizer).
#pragma once

#include "libaff/tokenizer/bpe.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aff::tokenizer {

struct AddedToken {
    TokenId id;
    std::string content;
    bool special;     // skipped by decode(skip_special = true)
    bool normalized;  // matched after normalisation (second pass)
};

class Tokenizer {
public:
    // Throws aff::Error naming the file and the field on anything it cannot honour.
    static Tokenizer from_json_file(const std::string& path);
    // `origin` is used as the path in error messages.
    static Tokenizer from_json(std::string_view json, const std::string& origin = "tokenizer.json");

    // parse_special = true: added tokens written in the text become their ids (Hugging
    // Face's default). false: no added token is recognised, all text is encoded as text
    // (use this for untrusted user content). Thread-safe.
    std::vector<TokenId> encode(std::string_view text, bool parse_special = true) const;
    void encode_into(std::string_view text, std::vector<TokenId>& out, bool parse_special = true) const;

    // Encodes the concatenation of `pieces` as one text (the split regexes and BPE see
    // across piece boundaries, so the ids equal encode(concatenation) whenever no
    // parse_special = false piece spells an added token), except that an added token is
    // recognised only where it lies wholly inside a piece with parse_special. This is
    // how a chat prompt is encoded: the template's markup may be special tokens, the
    // words of users and tools never are (someone who types "<｜User｜>" gets those
    // characters, not a turn marker). Each piece is repaired as encode() repairs text.
    struct Piece {
        std::string_view text;
        bool parse_special;
    };
    std::vector<TokenId> encode_pieces(std::span<const Piece> pieces) const;

    // Concatenated token bytes, then ill-formed UTF-8 replaced by U+FFFD (Hugging Face's
    // ByteLevel decoder). skip_special drops tokens whose "special" flag is set.
    std::string decode(std::span<const TokenId> ids, bool skip_special = false) const;

    std::optional<TokenId> token_to_id(std::string_view token) const;  // vocabulary form
    std::optional<std::string> id_to_token(TokenId id) const;          // vocabulary form
    // Raw bytes the token stands for (what decode concatenates); throws on unknown ids.
    std::string_view token_bytes(TokenId id) const;
    bool is_special(TokenId id) const;
    bool contains(TokenId id) const;
    // One past the highest id in use (vocabulary and added tokens).
    std::size_t id_limit() const;
    const std::vector<AddedToken>& added_tokens() const;

    struct Impl;

private:
    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

// Turns ids into text one at a time for streaming (SSE). Output never contains a broken
// UTF-8 sequence: bytes of a character split across tokens are held until it completes.
// The concatenation of every push() and finish() equals Tokenizer::decode of all ids.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
    // Text that became decidable with this token (may be empty).
    std::string push(TokenId id);
    // Everything held back, ill-formed remainders as U+FFFD; the decoder is then empty.
    std::string finish();
    // Bytes currently held back (an incomplete character).
    std::size_t pending() const { return pending_.size(); }

private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    std::string pending_;
};

}  // namespace aff::tokenizer
