// PCRE2 behind SplitRegex (see split_regex.hpp). Match data is kept per thread so that
// one compiled tokenizer can encode on many threads at once.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "libaff/tokenizer/split_regex.hpp"

#include "libaff/core/error.hpp"

#include <pcre2.h>

#include <vector>

namespace aff::tokenizer {
namespace {

// Oniguruma's Unicode \s: U+0009-U+000D, U+0085 and the Z categories (White_Space).
constexpr std::string_view space_class_body = "\\t-\\r\\x{85}\\p{Z}";

struct MatchData {
    pcre2_match_data* data = nullptr;
    ~MatchData() {
        if (data) pcre2_match_data_free(data);
    }
};

}  // namespace

struct SplitRegex::Impl {
    pcre2_code* code = nullptr;
    bool jit = false;
    std::string pattern;
    ~Impl() {
        if (code) pcre2_code_free(code);
    }
};

std::string SplitRegex::translate(std::string_view p, const std::string& where) {
    std::string out;
    out.reserve(p.size() + 32);
    bool in_class = false;
    for (std::size_t i = 0; i < p.size(); ++i) {
        char c = p[i];
        if (c == '\\') {
            if (i + 1 >= p.size()) throw_format(where + ": pattern ends with a backslash");
            char e = p[++i];
            switch (e) {
                case 's':
                    if (in_class) out.append(space_class_body);
                    else out.append("[").append(space_class_body).append("]");
                    break;
                case 'S':
                    if (in_class)
                        throw_unsupported(where + ": \\S inside a character class is not supported");
                    out.append("[^").append(space_class_body).append("]");
                    break;
                case 'w': case 'W': case 'd': case 'D': case 'b': case 'B': case 'h': case 'H':
                case 'v': case 'V': case 'R': case 'X': case 'N': case 'K': case 'G': case 'A':
                case 'z': case 'Z':
                    throw_unsupported(where + ": regex escape \\" + std::string(1, e) +
                                      " is not supported (its meaning differs between Oniguruma and PCRE2)");
                default:
                    out += '\\';
                    out += e;
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            out += c;
            // A ']' right after '[' or '[^' is a literal in both engines.
            if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
            if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
            continue;
        }
        if (c == '[' && in_class) {
            // Nested classes ([a-z&&[^aeiou]]) mean intersection in Oniguruma.
            throw_unsupported(where + ": nested character classes are not supported");
        }
        if (c == ']' && in_class) in_class = false;
        // Oniguruma (Ruby syntax) anchors ^ and $ at every line; PCRE2 only at the ends.
        if (!in_class && c == '^') {
            out.append("(?m:^)");
            continue;
        }
        if (!in_class && c == '$') {
            out.append("(?m:$)");
            continue;
        }
        out += c;
    }
    if (in_class) throw_format(where + ": unterminated character class");
    return out;
}

SplitRegex::SplitRegex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

static std::unique_ptr<SplitRegex::Impl> compile(std::string pattern, const std::string& where);

SplitRegex::SplitRegex(std::string_view pattern, const std::string& where)
    : impl_(compile(translate(pattern, where), where)) {}

SplitRegex SplitRegex::literal(std::string_view text, const std::string& where) {
    if (text.empty()) throw_format(where + ": empty split string");
    std::string quoted;
    for (char c : text) {
        if (std::string_view("\\^$.|?*+()[]{}-").find(c) != std::string_view::npos) quoted += '\\';
        quoted += c;
    }
    return SplitRegex(compile(quoted, where));
}

SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

static std::unique_ptr<SplitRegex::Impl> compile(std::string pattern, const std::string& where) {
    auto impl = std::make_unique<SplitRegex::Impl>();
    int err = 0;
    PCRE2_SIZE offset = 0;
    impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF, &err,
                               &offset, nullptr);
    if (!impl->code) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(err, buf, sizeof buf);
        throw_format(where + ": regex does not compile at offset " + std::to_string(offset) + ": " +
                     reinterpret_cast<const char*>(buf));
    }
    impl->jit = pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE) == 0;
    impl->pattern = std::move(pattern);
    return impl;
}

const std::string& SplitRegex::compiled_pattern() const { return impl_->pattern; }

bool SplitRegex::find(std::string_view subject, std::size_t from, std::size_t& begin, std::size_t& end) const {
    thread_local MatchData md;
    if (!md.data) md.data = pcre2_match_data_create(4, nullptr);
    auto s = reinterpret_cast<PCRE2_SPTR>(subject.data());
    while (from < subject.size()) {
        int rc = impl_->jit ? pcre2_jit_match(impl_->code, s, subject.size(), from, PCRE2_NO_UTF_CHECK, md.data, nullptr)
                            : pcre2_match(impl_->code, s, subject.size(), from, PCRE2_NO_UTF_CHECK, md.data, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0) {
            PCRE2_UCHAR buf[256];
            pcre2_get_error_message(rc, buf, sizeof buf);
            throw_internal(std::string("regex match failed: ") + reinterpret_cast<const char*>(buf));
        }
        PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
        begin = ov[0];
        end = ov[1];
        if (end > begin) return true;
        // An empty match splits nothing; look again one character further on.
        from = begin + 1;
        while (from < subject.size() && (static_cast<unsigned char>(subject[from]) & 0xC0) == 0x80) ++from;
    }
    return false;
}

}  // namespace aff::tokenizer
