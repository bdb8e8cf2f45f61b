// Token masks from a JSON grammar or fixed prefixes (see token_constraint.hpp).
#include "libaff/runtime/token_constraint.hpp"

#include <limits>

namespace aff {

TokenBytes::TokenBytes(std::vector<std::string> token_bytes, std::vector<std::int32_t> ends)
    : bytes(std::move(token_bytes)), end_tokens(std::move(ends)), is_end(bytes.size(), false),
      by_first_two(256 * 256), plain(bytes.size(), false) {
    for (std::int32_t e : end_tokens)
        if (e >= 0 && std::size_t(e) < bytes.size()) is_end[std::size_t(e)] = true;
    for (std::size_t id = 0; id < bytes.size(); ++id) {
        const std::string& b = bytes[id];
        if (b.empty() || is_end[id]) continue;
        const unsigned char first = static_cast<unsigned char>(b[0]);
        if (b.size() == 1) {
            single[first].push_back(std::int32_t(id));
        } else {
            const unsigned char second = static_cast<unsigned char>(b[1]);
            auto& list = by_first_two[std::size_t(first) * 256 + second];
            if (list.empty()) second_bytes[first].push_back(second);
            list.push_back(std::int32_t(id));
        }
        bool p = true;
        for (unsigned char c : b) p = p && c >= 0x20 && c != '"' && c != '\\';
        plain[id] = p;
        (p ? plain_ids : nonplain_ids).push_back(std::int32_t(id));
    }
}

TokenConstraint::TokenConstraint(std::shared_ptr<const TokenBytes> vocabulary, std::string start_after)
    : vocabulary_(std::move(vocabulary)), start_after_(std::move(start_after)) {}

void TokenConstraint::mask(std::span<float> logits) {
    if (!start_after_.empty()) return;
    mask_active(logits);
}

void TokenConstraint::accept(std::int32_t token) {
    if (start_after_.empty()) {
        accept_active(token);
        return;
    }
    if (token >= 0 && std::size_t(token) < vocabulary_->bytes.size()) seen_ += vocabulary_->bytes[std::size_t(token)];
    const std::size_t at = seen_.find(start_after_);
    if (at == std::string::npos) {
        if (seen_.size() > 4 * start_after_.size()) seen_.erase(0, seen_.size() - start_after_.size());
        return;
    }
    // Bytes of this token after the marker would belong to the constrained text; a token
    // that runs past the marker is rare, and those bytes are dropped from the check.
    start_after_.clear();
    seen_.clear();
}

void TokenConstraint::allow_only(std::span<float> logits, const std::vector<std::uint8_t>& allowed) const {
    const float none = -std::numeric_limits<float>::infinity();
    for (std::size_t id = 0; id < logits.size(); ++id)
        if (id >= allowed.size() || !allowed[id]) logits[id] = none;
}

JsonConstraint::JsonConstraint(std::shared_ptr<const TokenBytes> vocabulary, std::shared_ptr<const JsonGrammar> grammar,
                               std::string start_after)
    : TokenConstraint(std::move(vocabulary), std::move(start_after)), grammar_(std::move(grammar)), matcher_(*grammar_) {}

void JsonConstraint::mask_active(std::span<float> logits) {
    const TokenBytes& v = *vocabulary_;
    allowed_.assign(v.bytes.size(), 0);
    bool any = false;
    if (!dead_) {
        const bool plain_string = matcher_.in_plain_string();
        // Inside a string every token of plain bytes continues it with the state unchanged:
        // taken from a list, and only the others are probed below.
        JsonMatcher first(matcher_), second(matcher_), walk(matcher_);
        if (plain_string) {
            for (std::int32_t id : v.plain_ids) allowed_[std::size_t(id)] = 1, any = true;
            for (std::int32_t id : v.nonplain_ids) {
                walk = matcher_;
                if (walk.feed(v.bytes[std::size_t(id)])) allowed_[std::size_t(id)] = 1, any = true;
            }
        }
        for (int b = 0; b < 256 && !plain_string; ++b) {
            if (v.single[std::size_t(b)].empty() && v.second_bytes[std::size_t(b)].empty()) continue;
            first = matcher_;
            if (!first.feed(static_cast<unsigned char>(b))) continue;
            for (std::int32_t id : v.single[std::size_t(b)]) allowed_[std::size_t(id)] = 1, any = true;
            for (std::uint8_t b2 : v.second_bytes[std::size_t(b)]) {
                const auto& list = v.by_first_two[std::size_t(b) * 256 + b2];
                second = first;
                if (!second.feed(b2)) continue;
                for (std::int32_t id : list) {
                    walk = second;
                    if (walk.feed(std::string_view(v.bytes[std::size_t(id)]).substr(2))) allowed_[std::size_t(id)] = 1, any = true;
                }
            }
        }
    }
    // The end of the reply only once the value is whole (or when nothing else can follow).
    if (dead_ || !any || matcher_.complete())
        for (std::int32_t e : v.end_tokens)
            if (std::size_t(e) < allowed_.size()) allowed_[std::size_t(e)] = 1;
    allow_only(logits, allowed_);
}

void JsonConstraint::accept_active(std::int32_t token) {
    if (dead_ || token < 0 || std::size_t(token) >= vocabulary_->bytes.size() || vocabulary_->is_end[std::size_t(token)]) return;
    if (!matcher_.feed(vocabulary_->bytes[std::size_t(token)])) dead_ = true;
}

PrefixConstraint::PrefixConstraint(std::shared_ptr<const TokenBytes> vocabulary, std::vector<std::string> prefixes,
                                   std::string start_after)
    : TokenConstraint(std::move(vocabulary), std::move(start_after)), prefixes_(std::move(prefixes)) {
    done_ = prefixes_.empty();
}

void PrefixConstraint::mask_active(std::span<float> logits) {
    if (done_) return;
    const TokenBytes& v = *vocabulary_;
    allowed_.assign(v.bytes.size(), 0);
    for (std::size_t id = 0; id < v.bytes.size(); ++id) {
        const std::string_view t = v.bytes[id];
        if (t.empty() || v.is_end[id]) continue;
        for (const std::string& p : prefixes_) {
            const std::string_view rest = std::string_view(p).substr(matched_);
            // The token stays inside the prefix, or finishes it and runs on into free text.
            if (rest.substr(0, t.size()) == t || t.substr(0, rest.size()) == rest) {
                allowed_[id] = 1;
                break;
            }
        }
    }
    allow_only(logits, allowed_);
}

void PrefixConstraint::accept_active(std::int32_t token) {
    if (done_ || token < 0 || std::size_t(token) >= vocabulary_->bytes.size()) return;
    const std::string_view t = vocabulary_->bytes[std::size_t(token)];
    std::vector<std::string> still;
    for (const std::string& p : prefixes_) {
        const std::string_view rest = std::string_view(p).substr(matched_);
        if (t.substr(0, rest.size()) == rest) {
            done_ = true;  // a whole prefix is written
            return;
        }
        if (rest.substr(0, t.size()) == t) still.push_back(p);
    }
    if (still.empty()) {
        done_ = true;  // not a token the mask allowed: stop constraining
        return;
    }
    prefixes_ = std::move(still);
    matched_ += t.size();
}

}  // namespace aff
