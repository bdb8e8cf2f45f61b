// Tests for libaff/runtime/stop_matcher: a stop string split across pieces is still found,
// and no byte of it is ever released.
#include "libaff/runtime/stop_matcher.hpp"

#include <catch2/catch.hpp>

TEST_CASE("stop strings are matched across pieces and never released", "[runtime]") {
    aff::StopMatcher m({"END", "xyz"});
    bool hit = false;
    CHECK(m.push("abc E", hit) == "abc ");
    CHECK_FALSE(hit);
    CHECK(m.push("N", hit) == "");
    CHECK(m.push("Dmore", hit) == "");
    CHECK(hit);
    aff::StopMatcher n({"END"});
    CHECK(n.push("aEN", hit) == "a");
    CHECK(n.push("x", hit) == "ENx");
    CHECK(n.flush() == "");
}
