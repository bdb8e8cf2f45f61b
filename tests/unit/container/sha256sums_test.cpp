// Tests for libaff/container/sha256sums.cpp: the sha256sum line format both ways.
#include "libaff/container/sha256sums.hpp"
#include "libaff/core/error.hpp"

#include <catch2/catch.hpp>

namespace {
const std::string kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
}

TEST_CASE("SHA256SUMS lines parse in text, binary and escaped form", "[container]") {
    const auto lines = aff::parse_sha256sums(kAbc + "  a.bin\n" + kAbc + " *b c.bin\n\\" + kAbc + "  x\\\\y\\nz\n", "S");
    REQUIRE(lines.size() == 3);
    CHECK(aff::to_hex(lines[0].digest) == kAbc);
    CHECK(lines[0].name == "a.bin");
    CHECK(lines[1].name == "b c.bin");
    CHECK(lines[2].name == "x\\y\nz");
    CHECK(aff::format_sha256sums_line(lines[0]) == kAbc + "  a.bin\n");
    CHECK(aff::format_sha256sums_line(lines[2]) == "\\" + kAbc + "  x\\\\y\\nz\n");
    std::string upper = kAbc;
    for (char& c : upper) c = static_cast<char>(std::toupper(c));
    CHECK(aff::parse_sha256sums(upper + "  a\n", "S")[0].digest == lines[0].digest);
}

TEST_CASE("a malformed SHA256SUMS line is refused naming the file and line", "[container][corrupt]") {
    const std::string ok = kAbc + "  a.bin\n";
    const std::string why = "malformed (expected 64 hex digits, two spaces and a file name)";
    CHECK_THROWS_WITH(aff::parse_sha256sums(ok + "abc  a.bin\n", "SUMS"), "SUMS: line 2: " + why);
    CHECK_THROWS_WITH(aff::parse_sha256sums(ok + kAbc + " a.bin\n", "SUMS"), "SUMS: line 2: " + why);
    CHECK_THROWS_WITH(aff::parse_sha256sums(ok + kAbc + "  \n", "SUMS"), "SUMS: line 2: " + why);
    CHECK_THROWS_WITH(aff::parse_sha256sums("\n", "SUMS"), "SUMS: line 1: " + why);
    CHECK_THROWS_WITH(aff::parse_sha256sums(kAbc.substr(0, 63) + "g  a\n", "SUMS"), "SUMS: line 1: " + why);
    CHECK_THROWS_WITH(aff::parse_sha256sums(ok + kAbc + "  b", "SUMS"), "SUMS: line 2: no newline at the end of the line");
    CHECK_THROWS_WITH(aff::parse_sha256sums("\\" + kAbc + "  a\\q\n", "SUMS"), "SUMS: line 1: unknown escape \\q in the name");
    CHECK(aff::parse_sha256sums("", "SUMS").empty());
}
