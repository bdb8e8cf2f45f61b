// UTF-8 repair: the maximal-subpart rule (values checked against Python's
// bytes.decode("utf-8", "replace")) and its incremental form.
#include "libaff/tokenizer/utf8.hpp"

#include <catch2/catch.hpp>

#include <random>

namespace tk = aff::tokenizer;

TEST_CASE("ill-formed UTF-8 is repaired one U+FFFD per maximal subpart", "[tokenizer]") {
    const std::string R = "\uFFFD";
    CHECK(tk::utf8_lossy("plain ascii") == "plain ascii");
    CHECK(tk::utf8_lossy("\xE6\x97\xA5") == "日");
    CHECK(tk::utf8_lossy("\xFF") == R);
    CHECK(tk::utf8_lossy("\xC0\x80") == R + R);          // overlong: C0 never leads
    CHECK(tk::utf8_lossy("\xE0\x80\x80") == R + R + R);  // E0 needs A0..BF next
    CHECK(tk::utf8_lossy("\xED\xA0\x80") == R + R + R);  // surrogate
    CHECK(tk::utf8_lossy("\xF4\x90\x80\x80") == R + R + R + R);  // above U+10FFFF
    CHECK(tk::utf8_lossy("\xE6\x97") == R);              // truncated: one U+FFFD
    CHECK(tk::utf8_lossy("\xE6\x97x") == R + "x");
    CHECK(tk::utf8_lossy("\xF0\x9F\x98") == R);
    CHECK(tk::utf8_lossy("\x80\xBF") == R + R);
    CHECK(tk::utf8_lossy("a\xF8\x88\x80\x80\x80z") == "a" + R + R + R + R + R + "z");
    CHECK(tk::utf8_valid("日本語 😀"));
    CHECK_FALSE(tk::utf8_valid("\xED\xA0\x80"));
    CHECK_FALSE(tk::utf8_valid("\xE6\x97"));
}

TEST_CASE("incremental repair in any split equals repair of the whole", "[tokenizer]") {
    std::mt19937 rng(3);
    const char* alphabet[] = {"a", "\xE6", "\x97", "\xA5", "\xF0", "\x9F", "\x98", "\x80", "\xFF", "\xED", "\xC3"};
    for (int i = 0; i < 2000; ++i) {
        std::string s;
        for (int k = rng() % 16; k > 0; --k) s += alphabet[rng() % 11];
        std::string out, pending;
        std::size_t pos = 0;
        while (pos < s.size()) {
            std::size_t n = 1 + rng() % 3;
            pending += s.substr(pos, n);
            pos += n;
            std::string piece;
            pending.erase(0, tk::utf8_repair_prefix(pending, false, piece));
            REQUIRE(tk::utf8_valid(piece));
            out += piece;
        }
        tk::utf8_repair_prefix(pending, true, out);
        REQUIRE(out == tk::utf8_lossy(s));
    }
}
