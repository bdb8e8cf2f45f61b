// Loading tokenizer.json and the encode/decode pipelines (see tokenizer.hpp). The order
// follows Hugging Face's Tokenizer::encode: added tokens split off, each remaining piece
// through every Split regex in turn (each piece on its own), then BPE per piece over raw
// bytes (ByteLevel's character mapping is folded into the vocabulary at load).
#include "libaff/tokenizer/tokenizer.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/mapped_file.hpp"
#include "libaff/tokenizer/added_tokens.hpp"
#include "libaff/tokenizer/byte_level.hpp"
#include "libaff/tokenizer/split_regex.hpp"
#include "libaff/tokenizer/utf8.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace aff::tokenizer {

using json = nlohmann::json;

namespace {

struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

constexpr std::size_t cache_min_bytes = 4;       // shorter words are merged directly
constexpr std::size_t cache_max_bytes = 256;     // longer words are not worth keeping
constexpr std::size_t cache_max_entries = 1 << 18;

}  // namespace

struct Tokenizer::Impl {
    std::string origin;
    std::vector<std::string> id_token;  // vocabulary form; empty = unused id
    std::vector<std::string> id_bytes;  // what the ByteLevel decoder makes of the token
    std::vector<std::uint8_t> id_flags;
    static constexpr std::uint8_t used = 1, special = 2;
    StringMap token_ids;   // vocabulary form -> id (added tokens override)
    StringMap byte_vocab;  // raw bytes -> id, for ignore_merges
    bool ignore_merges = false;
    std::unique_ptr<BpeModel> bpe;
    std::vector<SplitRegex> splits;
    AddedTokenMatcher raw_tokens, normalized_tokens;
    std::vector<AddedToken> added;

    mutable std::mutex cache_mutex;
    mutable std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> cache;

    // Byte ranges [first, second) of a text where added tokens may be recognised.
    using SpecialRanges = std::span<const std::pair<std::size_t, std::size_t>>;

    void split_and_merge(std::size_t level, std::string_view piece, std::vector<TokenId>& out) const;
    void merge_word(std::string_view word, std::vector<TokenId>& out) const;
    void encode_gap(std::string_view text, std::size_t from, std::size_t to, SpecialRanges ranges,
                    std::vector<TokenId>& out) const;
    void encode_with_ranges(std::string_view text, SpecialRanges ranges, std::vector<TokenId>& out) const;
    void check_id(TokenId id) const;
};

// ---------------------------------------------------------------------------------------
// Loading

namespace {

std::string to_hex_byte(unsigned b) {
    const char* digits = "0123456789abcdef";
    return {digits[b >> 4], digits[b & 15]};
}

[[noreturn]] void unsupported(const std::string& field, const std::string& what) {
    throw_unsupported(field + ": " + what);
}

const json& member(const json& obj, const char* key, const std::string& where) {
    if (!obj.is_object()) throw_format(where + ": expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) throw_format(where + "." + key + ": missing");
    return *it;
}

bool flag(const json& obj, const char* key, const std::string& where, bool fallback) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw_format(where + "." + key + ": expected true or false");
    return it->get<bool>();
}

std::string type_of(const json& obj, const std::string& where) {
    const json& t = member(obj, "type", where);
    if (!t.is_string()) throw_format(where + ".type: expected a string");
    return t.get<std::string>();
}

void load_normalizer(const json& n) {
    if (n.is_null()) return;
    std::string type = type_of(n, "normalizer");
    if (type == "Sequence") {
        const json& list = member(n, "normalizers", "normalizer");
        if (list.is_array() && list.empty()) return;
    }
    unsupported("normalizer", "type \"" + type + "\" is not supported (only none or an empty Sequence)");
}

void load_split(const json& s, const std::string& where, Tokenizer::Impl& impl) {
    std::string behavior = member(s, "behavior", where).get<std::string>();
    if (behavior != "Isolated")
        unsupported(where + ".behavior", "\"" + behavior + "\" is not supported (only \"Isolated\")");
    if (flag(s, "invert", where, false)) unsupported(where + ".invert", "true is not supported");
    const json& pattern = member(s, "pattern", where);
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
        impl.splits.emplace_back(pattern["Regex"].get<std::string>(), where + ".pattern.Regex");
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
        impl.splits.push_back(SplitRegex::literal(pattern["String"].get<std::string>(), where + ".pattern.String"));
    } else {
        throw_format(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    }
}

void load_byte_level_pre(const json& b, const std::string& where) {
    if (flag(b, "add_prefix_space", where, false)) unsupported(where + ".add_prefix_space", "true is not supported");
    if (flag(b, "use_regex", where, true))
        unsupported(where + ".use_regex", "true is not supported (DeepSeek splits with explicit Split steps)");
}

void load_pre_tokenizer(const json& p, Tokenizer::Impl& impl) {
    if (p.is_null()) unsupported("pre_tokenizer", "none is not supported (a ByteLevel step is required)");
    std::vector<std::pair<const json*, std::string>> steps;
    if (type_of(p, "pre_tokenizer") == "Sequence") {
        const json& list = member(p, "pretokenizers", "pre_tokenizer");
        if (!list.is_array()) throw_format("pre_tokenizer.pretokenizers: expected an array");
        for (std::size_t i = 0; i < list.size(); ++i)
            steps.emplace_back(&list[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]");
    } else {
        steps.emplace_back(&p, "pre_tokenizer");
    }
    bool byte_level = false;
    for (const auto& [step, where] : steps) {
        std::string type = type_of(*step, where);
        if (byte_level) unsupported(where, "a step after ByteLevel is not supported");
        if (type == "Split") load_split(*step, where, impl);
        else if (type == "ByteLevel") load_byte_level_pre(*step, where), byte_level = true;
        else unsupported(where + ".type", "\"" + type + "\" is not supported (only Split and ByteLevel)");
    }
    if (!byte_level) unsupported("pre_tokenizer", "no ByteLevel step (only byte-level BPE is supported)");
}

void load_decoder(const json& d) {
    if (d.is_null()) unsupported("decoder", "none is not supported (only ByteLevel)");
    std::string type = type_of(d, "decoder");
    if (type != "ByteLevel") unsupported("decoder.type", "\"" + type + "\" is not supported (only ByteLevel)");
}

// Post-processors only add tokens when asked to (add_special_tokens); encode never asks,
// so those that do nothing else are accepted.
void load_post_processor(const json& p, const std::string& where) {
    if (p.is_null()) return;
    std::string type = type_of(p, where);
    if (type == "ByteLevel" || type == "TemplateProcessing") return;
    if (type == "Sequence") {
        const json& list = member(p, "processors", where);
        for (std::size_t i = 0; i < list.size(); ++i)
            load_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]");
        return;
    }
    unsupported(where + ".type", "\"" + type + "\" is not supported");
}

void set_token(Tokenizer::Impl& impl, TokenId id, const std::string& token, bool special, const std::string& where) {
    if (id < 0 || id >= (1 << 21)) throw_format(where + ": id " + std::to_string(id) + " out of range");
    std::size_t need = std::size_t(id) + 1;
    if (impl.id_token.size() < need) {
        impl.id_token.resize(need);
        impl.id_bytes.resize(need);
        impl.id_flags.resize(need, 0);
    }
    impl.id_token[id] = token;
    // The ByteLevel decoder maps each character back to its byte; a token holding any
    // character outside the alphabet is emitted as its own UTF-8 bytes instead.
    auto bytes = byte_level_to_bytes(token);
    impl.id_bytes[id] = bytes ? *bytes : token;
    impl.id_flags[id] = Tokenizer::Impl::used | (special ? Tokenizer::Impl::special : 0);
}

void load_model(const json& m, Tokenizer::Impl& impl) {
    const std::string w = "model";
    std::string type = type_of(m, w);
    if (type != "BPE") unsupported("model.type", "\"" + type + "\" is not supported (only BPE)");
    auto null_or_absent = [&](const char* key) {
        auto it = m.find(key);
        if (it != m.end() && !it->is_null()) unsupported(w + "." + key, "is set; only null is supported");
    };
    null_or_absent("dropout");
    null_or_absent("unk_token");
    null_or_absent("continuing_subword_prefix");
    null_or_absent("end_of_word_suffix");
    if (flag(m, "byte_fallback", w, false)) unsupported("model.byte_fallback", "true is not supported");
    impl.ignore_merges = flag(m, "ignore_merges", w, false);

    const json& vocab = member(m, "vocab", w);
    if (!vocab.is_object()) throw_format("model.vocab: expected an object");
    impl.token_ids.reserve(vocab.size() + 1024);
    impl.byte_vocab.reserve(vocab.size());
    impl.id_token.reserve(vocab.size() + 1024);
    impl.id_bytes.reserve(vocab.size() + 1024);
    impl.id_flags.reserve(vocab.size() + 1024);
    for (const auto& [token, id] : vocab.items()) {
        if (!id.is_number_integer()) throw_format("model.vocab[\"" + token + "\"]: expected an integer id");
        TokenId i = id.get<TokenId>();
        set_token(impl, i, token, false, "model.vocab[\"" + token + "\"]");
        impl.token_ids[token] = i;
        impl.byte_vocab[impl.id_bytes[i]] = i;
    }

    std::vector<TokenId> byte_tokens(256);
    for (unsigned b = 0; b < 256; ++b) {
        std::string ch = bytes_to_byte_level(std::string(1, char(b)));
        auto it = impl.token_ids.find(ch);
        if (it == impl.token_ids.end())
            throw_format("model.vocab: no token for byte 0x" + to_hex_byte(b) + " (byte-level BPE needs all 256)");
        byte_tokens[b] = it->second;
    }

    const json& merges = member(m, "merges", w);
    if (!merges.is_array()) throw_format("model.merges: expected an array");
    std::vector<BpeModel::Merge> list;
    list.reserve(merges.size());
    for (std::size_t r = 0; r < merges.size(); ++r) {
        const json& e = merges[r];
        std::string where = "model.merges[" + std::to_string(r) + "]";
        std::string a, b;
        if (e.is_string()) {
            const std::string& s = e.get_ref<const std::string&>();
            auto sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                throw_format(where + ": expected two tokens separated by one space");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            a = e[0].get<std::string>();
            b = e[1].get<std::string>();
        } else {
            throw_format(where + ": expected \"a b\" or [\"a\", \"b\"]");
        }
        std::string ab = a;
        ab += b;
        auto ia = impl.token_ids.find(a), ib = impl.token_ids.find(b), ic = impl.token_ids.find(ab);
        if (ia == impl.token_ids.end() || ib == impl.token_ids.end())
            throw_format(where + ": token not in vocabulary");
        if (ic == impl.token_ids.end()) throw_format(where + ": merged token \"" + ab + "\" not in vocabulary");
        list.push_back({ia->second, ib->second, ic->second});
    }
    impl.bpe = std::make_unique<BpeModel>(std::move(byte_tokens), list);
}

// Hugging Face does not take an added token's id from the file: it looks the content up
// (added tokens, then the model vocabulary) and otherwise gives the next id after the
// vocabulary or the highest added id (AddedVocabulary::add_tokens). A file whose ids
// differ from that would be encoded with other ids there, so it is refused.
void load_added_tokens(const json& list, std::size_t model_vocab_size, Tokenizer::Impl& impl) {
    if (list.is_null()) return;
    if (!list.is_array()) throw_format("added_tokens: expected an array");
    std::int64_t max_added = -1;
    for (std::size_t i = 0; i < list.size(); ++i) {
        std::string where = "added_tokens[" + std::to_string(i) + "]";
        const json& t = list[i];
        const json& id = member(t, "id", where);
        const json& content = member(t, "content", where);
        if (!id.is_number_integer() || !content.is_string()) throw_format(where + ": expected integer id and string content");
        for (const char* key : {"single_word", "lstrip", "rstrip"})
            if (flag(t, key, where, false)) unsupported(where + "." + key, "true is not supported");
        AddedToken a{id.get<TokenId>(), content.get<std::string>(), flag(t, "special", where, false),
                     flag(t, "normalized", where, true)};
        if (a.content.empty()) throw_format(where + ".content: empty");
        TokenId expected;
        if (auto known = impl.token_ids.find(a.content); known != impl.token_ids.end()) {
            expected = known->second;
        } else if (max_added < 0) {
            expected = TokenId(model_vocab_size);
        } else {
            expected = max_added >= std::int64_t(model_vocab_size) ? TokenId(max_added + 1) : TokenId(model_vocab_size);
        }
        if (a.id != expected)
            unsupported(where + ".id", std::to_string(a.id) + " differs from the id Hugging Face assigns (" +
                                           std::to_string(expected) + ")");
        max_added = std::max<std::int64_t>(max_added, a.id);
        set_token(impl, a.id, a.content, a.special, where);
        impl.token_ids[a.content] = a.id;
        (a.normalized ? impl.normalized_tokens : impl.raw_tokens).add(a.content, a.id);
        impl.added.push_back(std::move(a));
    }
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& origin) {
    auto impl = std::make_shared<Impl>();
    impl->origin = origin;
    try {
        json root;
        try {
            root = json::parse(text.begin(), text.end());
        } catch (const json::exception& e) {
            throw_format(std::string("not valid JSON: ") + e.what());
        }
        if (!root.is_object()) throw_format("expected a JSON object at top level");
        for (const char* key : {"truncation", "padding"}) {
            auto it = root.find(key);
            if (it != root.end() && !it->is_null()) unsupported(key, "is set; only null is supported");
        }
        try {
            load_normalizer(root.value("normalizer", json()));
            load_pre_tokenizer(root.value("pre_tokenizer", json()), *impl);
            const json& model = member(root, "model", "(top level)");
            load_model(model, *impl);
            load_added_tokens(root.value("added_tokens", json()), model["vocab"].size(), *impl);
            load_decoder(root.value("decoder", json()));
            load_post_processor(root.value("post_processor", json()), "post_processor");
        } catch (const json::exception& e) {
            throw_format(std::string("unexpected JSON type: ") + e.what());
        }
    } catch (Error& e) {
        e.set_path_if_empty(origin);
        throw;
    }
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json_file(const std::string& path) {
    MappedFile file(path);
    return from_json(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path);
}

// ---------------------------------------------------------------------------------------
// Encoding

void Tokenizer::Impl::merge_word(std::string_view word, std::vector<TokenId>& out) const {
    if (ignore_merges) {
        auto it = byte_vocab.find(word);
        if (it != byte_vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    if (word.size() < cache_min_bytes || word.size() > cache_max_bytes) {
        bpe->encode_word(word, out);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(cache_mutex);
        auto it = cache.find(word);
        if (it != cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::size_t start = out.size();
    bpe->encode_word(word, out);
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() >= cache_max_entries) cache.clear();
    cache.emplace(std::string(word), std::vector<TokenId>(out.begin() + std::ptrdiff_t(start), out.end()));
}

void Tokenizer::Impl::split_and_merge(std::size_t level, std::string_view piece, std::vector<TokenId>& out) const {
    if (piece.empty()) return;
    if (level == splits.size()) {
        merge_word(piece, out);
        return;
    }
    const SplitRegex& re = splits[level];
    std::size_t pos = 0, b, e;
    while (pos < piece.size() && re.find(piece, pos, b, e)) {
        if (b > pos) split_and_merge(level + 1, piece.substr(pos, b - pos), out);
        split_and_merge(level + 1, piece.substr(b, e - b), out);
        pos = e;
    }
    if (pos < piece.size()) split_and_merge(level + 1, piece.substr(pos), out);
}

namespace {

// The leftmost-longest match of `m` at or after `from` that lies wholly inside [from, to)
// and inside one of `ranges` (sorted, disjoint).
bool find_in_ranges(const AddedTokenMatcher& m, std::string_view text, std::size_t from, std::size_t to,
                    Tokenizer::Impl::SpecialRanges ranges, std::size_t& b, std::size_t& e, TokenId& id) {
    if (m.empty()) return false;
    for (const auto& [rb, re] : ranges) {
        if (re <= from) continue;
        if (rb >= to) break;
        if (m.find(text.substr(0, std::min(to, re)), std::max(from, rb), b, e, id)) return true;
    }
    return false;
}

}  // namespace

// Text between two raw added tokens: normalised added tokens split it (second pass).
void Tokenizer::Impl::encode_gap(std::string_view text, std::size_t from, std::size_t to, SpecialRanges ranges,
                                 std::vector<TokenId>& out) const {
    std::size_t pos = from, b, e;
    TokenId id;
    while (pos < to && find_in_ranges(normalized_tokens, text, pos, to, ranges, b, e, id)) {
        split_and_merge(0, text.substr(pos, b - pos), out);
        out.push_back(id);
        pos = e;
    }
    split_and_merge(0, text.substr(pos, to - pos), out);
}

void Tokenizer::Impl::encode_with_ranges(std::string_view text, SpecialRanges ranges, std::vector<TokenId>& out) const {
    std::size_t pos = 0, b, e;
    TokenId id;
    while (pos < text.size() && find_in_ranges(raw_tokens, text, pos, text.size(), ranges, b, e, id)) {
        encode_gap(text, pos, b, ranges, out);
        out.push_back(id);
        pos = e;
    }
    encode_gap(text, pos, text.size(), ranges, out);
}

void Tokenizer::encode_into(std::string_view text, std::vector<TokenId>& out, bool parse_special) const {
    std::string repaired;
    if (!utf8_valid(text)) {
        repaired = utf8_lossy(text);
        text = repaired;
    }
    const std::pair<std::size_t, std::size_t> whole{0, text.size()};
    impl_->encode_with_ranges(text, parse_special ? Impl::SpecialRanges(&whole, 1) : Impl::SpecialRanges(), out);
}

std::vector<TokenId> Tokenizer::encode_pieces(std::span<const Piece> pieces) const {
    std::string text;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const Piece& p : pieces) {
        const std::size_t begin = text.size();
        if (utf8_valid(p.text)) text += p.text;
        else text += utf8_lossy(p.text);
        if (!p.parse_special || text.size() == begin) continue;
        if (!ranges.empty() && ranges.back().second == begin) ranges.back().second = text.size();
        else ranges.emplace_back(begin, text.size());
    }
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 3 + 4);
    impl_->encode_with_ranges(text, ranges, ids);
    return ids;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool parse_special) const {
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 3 + 4);
    encode_into(text, ids, parse_special);
    return ids;
}

// ---------------------------------------------------------------------------------------
// Decoding and look-ups

void Tokenizer::Impl::check_id(TokenId id) const {
    if (id < 0 || std::size_t(id) >= id_flags.size() || !(id_flags[id] & used))
        throw_format("token id " + std::to_string(id) + " is not in the vocabulary", origin);
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
    std::string bytes;
    for (TokenId id : ids) {
        impl_->check_id(id);
        if (skip_special && (impl_->id_flags[id] & Impl::special)) continue;
        bytes += impl_->id_bytes[id];
    }
    return utf8_valid(bytes) ? bytes : utf8_lossy(bytes);
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
    auto it = impl_->token_ids.find(token);
    if (it == impl_->token_ids.end()) return std::nullopt;
    return it->second;
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
    if (!contains(id)) return std::nullopt;
    return impl_->id_token[id];
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
    impl_->check_id(id);
    return impl_->id_bytes[id];
}

bool Tokenizer::contains(TokenId id) const {
    return id >= 0 && std::size_t(id) < impl_->id_flags.size() && (impl_->id_flags[id] & Impl::used);
}

bool Tokenizer::is_special(TokenId id) const { return contains(id) && (impl_->id_flags[id] & Impl::special); }

std::size_t Tokenizer::id_limit() const { return impl_->id_flags.size(); }

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

// ---------------------------------------------------------------------------------------
// Streaming

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(TokenId id) {
    std::string_view bytes = tokenizer_->token_bytes(id);
    if (skip_special_ && tokenizer_->is_special(id)) return {};
    pending_ += bytes;
    std::string out;
    std::size_t used = utf8_repair_prefix(pending_, false, out);
    pending_.erase(0, used);
    return out;
}

std::string StreamDecoder::finish() {
    std::string out;
    utf8_repair_prefix(pending_, true, out);
    pending_.clear();
    return out;
}

}  // namespace aff::tokenizer
