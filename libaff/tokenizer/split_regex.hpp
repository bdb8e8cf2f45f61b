// One `Split` pre-tokenizer step of a Hugging Face tokenizer.json, run with PCRE2 (JIT,
// UTF mode). Hugging Face compiles these patterns with Oniguruma, whose Unicode `\s`
// differs from PCRE2's (Oniguruma's includes U+0085 NEL), so the pattern is translated
// first; escapes whose meaning differs between the engines and that DeepSeek's patterns
// do not use (\w \d \b \h \R \X ...) are rejected rather than guessed.
// Only behaviour "Isolated" without invert is implemented: every match and every gap
// between matches becomes its own piece.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace aff::tokenizer {

class SplitRegex {
public:
    // `pattern` is the regex text from tokenizer.json; `where` names the field in errors.
    SplitRegex(std::string_view pattern, const std::string& where);
    // A literal pattern ({"String": ...}): matched verbatim.
    static SplitRegex literal(std::string_view text, const std::string& where);
    ~SplitRegex();
    SplitRegex(SplitRegex&&) noexcept;
    SplitRegex& operator=(SplitRegex&&) noexcept;

    // Finds the next non-empty match in subject[from, size); false when there is none.
    // The subject must be valid UTF-8 and `from` on a character boundary. Matching sees
    // only `subject`, so lookaheads stop at its end as in Hugging Face (each piece is
    // split on its own). Thread-safe.
    bool find(std::string_view subject, std::size_t from, std::size_t& begin, std::size_t& end) const;

    // The PCRE2 pattern actually compiled (after translation); for tests and errors.
    const std::string& compiled_pattern() const;

    // Onig-to-PCRE2 translation on its own, exposed for tests.
    static std::string translate(std::string_view onig_pattern, const std::string& where);

    struct Impl;  // PCRE2 state, defined in split_regex.cpp

private:
    explicit SplitRegex(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace aff::tokenizer
