// UTF-8 validation and maximal-subpart repair (see utf8.hpp). Table 3-7 of the Unicode
// standard gives the well-formed byte sequences; the second byte's range depends on the
// lead byte, which is what excludes overlongs, surrogates and code points above U+10FFFF.
#include "libaff/tokenizer/utf8.hpp"

#include <cstdint>

namespace aff::tokenizer {
namespace {

struct Lead {
    int length;             // 0: never a valid lead byte
    std::uint8_t lo, hi;    // allowed range of the second byte
};

Lead lead_of(std::uint8_t b) {
    if (b < 0x80) return {1, 0, 0};
    if (b < 0xC2) return {0, 0, 0};
    if (b < 0xE0) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};
    if (b < 0xF0) return {3, 0x80, 0xBF};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b < 0xF4) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};
    return {0, 0, 0};
}

// Length of the valid prefix of the sequence at p (1..length-1 when ill-formed or cut
// short, `length` when complete); sets `complete`.
int scan_sequence(const std::uint8_t* p, std::size_t avail, const Lead& lead, bool& complete) {
    complete = false;
    int k = 1;
    while (k < lead.length) {
        if (static_cast<std::size_t>(k) >= avail) return k;  // cut short
        std::uint8_t c = p[k];
        bool ok = k == 1 ? (c >= lead.lo && c <= lead.hi) : (c >= 0x80 && c <= 0xBF);
        if (!ok) return k;
        ++k;
    }
    complete = true;
    return k;
}

}  // namespace

bool utf8_valid(std::string_view bytes) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
    std::size_t n = bytes.size(), i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            ++i;
            continue;
        }
        Lead lead = lead_of(p[i]);
        if (lead.length == 0) return false;
        bool complete;
        int k = scan_sequence(p + i, n - i, lead, complete);
        if (!complete) return false;
        i += static_cast<std::size_t>(k);
    }
    return true;
}

std::size_t utf8_repair_prefix(std::string_view bytes, bool final, std::string& out) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
    std::size_t n = bytes.size(), i = 0, run = 0;  // [run, i) is valid and not yet copied
    while (i < n) {
        if (p[i] < 0x80) {
            ++i;
            continue;
        }
        Lead lead = lead_of(p[i]);
        if (lead.length == 0) {
            out.append(bytes.substr(run, i - run));
            out.append(replacement_character);
            run = ++i;
            continue;
        }
        bool complete;
        int k = scan_sequence(p + i, n - i, lead, complete);
        if (complete) {
            i += static_cast<std::size_t>(k);
            continue;
        }
        bool cut_short = i + static_cast<std::size_t>(k) >= n;
        if (cut_short && !final) break;  // may still be completed by later bytes
        out.append(bytes.substr(run, i - run));
        out.append(replacement_character);
        i += static_cast<std::size_t>(k);
        run = i;
    }
    out.append(bytes.substr(run, i - run));
    return i;
}

void utf8_append_lossy(std::string_view bytes, std::string& out) { utf8_repair_prefix(bytes, true, out); }

std::string utf8_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    utf8_append_lossy(bytes, out);
    return out;
}

}  // namespace aff::tokenizer
