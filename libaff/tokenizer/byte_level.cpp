// The byte-level alphabet (see byte_level.hpp): bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF map to themselves, the other 68 to U+0100 + their rank among those 68.
#include "libaff/tokenizer/byte_level.hpp"

namespace aff::tokenizer {
namespace {

bool maps_to_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct Tables {
    std::array<char32_t, 256> to_char{};
    std::array<std::int16_t, 0x144> to_byte{};  // indexed by code point < 0x144
    Tables() {
        to_byte.fill(-1);
        unsigned next = 0;
        for (unsigned b = 0; b < 256; ++b) {
            char32_t c = maps_to_itself(b) ? char32_t(b) : char32_t(0x100 + next++);
            to_char[b] = c;
            to_byte[c] = static_cast<std::int16_t>(b);
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

void append_utf8(char32_t c, std::string& out) {
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
}

}  // namespace

char32_t byte_to_char(std::uint8_t b) { return tables().to_char[b]; }

std::optional<std::uint8_t> char_to_byte(char32_t c) {
    if (c >= tables().to_byte.size() || tables().to_byte[c] < 0) return std::nullopt;
    return static_cast<std::uint8_t>(tables().to_byte[c]);
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    std::size_t n = text.size(), i = 0;
    while (i < n) {
        char32_t c;
        if (p[i] < 0x80) {
            c = p[i++];
        } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) {
            c = char32_t(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F);
            if (c < 0x80) return std::nullopt;  // overlong
            i += 2;
        } else {
            return std::nullopt;  // every byte-level code point is below U+0800
        }
        auto b = char_to_byte(c);
        if (!b) return std::nullopt;
        out += char(*b);
    }
    return out;
}

std::string bytes_to_byte_level(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) append_utf8(byte_to_char(b), out);
    return out;
}

}  // namespace aff::tokenizer
