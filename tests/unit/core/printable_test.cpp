// Tests for libaff/core/printable: bytes from files are made harmless for a terminal.
#include "libaff/core/printable.hpp"

#include <catch2/catch.hpp>

TEST_CASE("printable escapes control bytes, C1 controls and broken UTF-8, and keeps the rest", "[core]") {
    CHECK(aff::printable("blk.0.ffn_gate_exps.weight") == "blk.0.ffn_gate_exps.weight");
    CHECK(aff::printable("\x1b]0;owned\x07\x1b[2J") == "\\x1b]0;owned\\x07\\x1b[2J");
    CHECK(aff::printable("a\r\nb\tc\x7f") == "a\\x0d\\x0ab\\x09c\\x7f");
    CHECK(aff::printable("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82") == "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82");
    CHECK(aff::printable("\xc2\x9b") == "\\xc2\\x9b");      // U+009B, the 8-bit CSI
    CHECK(aff::printable("\xc3") == "\\xc3");              // truncated sequence
    CHECK(aff::printable("\xc0\xaf") == "\\xc0\\xaf");      // overlong
    CHECK(aff::printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // surrogate
    CHECK(aff::printable(std::string_view("a\0b", 3)) == "a\\x00b");
}
