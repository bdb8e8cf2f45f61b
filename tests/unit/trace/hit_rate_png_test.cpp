// Tests for the PNG curve of libaff/trace (hit_rate_png.cpp): where it is written beside
// the SVG, and that a build with libpng encodes a PNG of the chart's size while one
// without says so by a usage error. The pixels are checked by tests/cli/aff-trace/replay-png.sh.
#include "libaff/core/error.hpp"
#include "libaff/trace/replay.hpp"

#include <catch2/catch.hpp>

using namespace aff::trace;

TEST_CASE("the PNG goes beside the SVG", "[trace]") {
    CHECK(png_beside("out/curve.svg") == "out/curve.png");
    CHECK(png_beside("curve") == "curve.png");
    CHECK(png_beside("curve.SVG") == "curve.SVG.png");
    CHECK(png_beside(".svg") == ".svg.png");
}

TEST_CASE("the PNG curve is a 720 x 440 RGB image where libpng is built in", "[trace]") {
    ReplayResult r;
    r.policy = "heat";
    r.gpu_bytes = 1 << 20;
    r.counters.accesses = 4;
    r.counters.gpu_hits = 1;
    if (!hit_rate_png_available()) {
        REQUIRE_THROWS_WITH(hit_rate_png({r}, "t"), Catch::Contains("no PNG support"));
        return;
    }
    const std::vector<std::uint8_t> png = hit_rate_png({r}, "t");
    REQUIRE(png.size() > 33);
    const std::vector<std::uint8_t> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    CHECK(std::vector<std::uint8_t>(png.begin(), png.begin() + 8) == signature);
    // IHDR: width and height (big-endian), 8 bits, colour type 2 (RGB).
    CHECK(std::vector<std::uint8_t>(png.begin() + 12, png.begin() + 16) == std::vector<std::uint8_t>{'I', 'H', 'D', 'R'});
    CHECK((png[16] << 24 | png[17] << 16 | png[18] << 8 | png[19]) == 720);
    CHECK((png[20] << 24 | png[21] << 16 | png[22] << 8 | png[23]) == 440);
    CHECK(png[24] == 8);
    CHECK(png[25] == 2);
}
