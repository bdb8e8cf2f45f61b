// Tests for libaff/serve/sse: one event per data line, [DONE], and the reader that the
// other tests use, including its refusal of malformed framing.
#include "libaff/core/error.hpp"
#include "libaff/serve/sse.hpp"

#include <catch2/catch.hpp>

using namespace aff::serve;

TEST_CASE("an SSE event is one data line and a blank line, newlines escaped", "[serve]") {
    const std::string e = sse_event({{"text", "a\nb"}});
    CHECK(e == "data: {\"text\":\"a\\nb\"}\n\n");
    CHECK(sse_done() == "data: [DONE]\n\n");
}

TEST_CASE("the SSE reader returns payloads and rejects broken framing", "[serve]") {
    const auto p = sse_payloads(sse_event({{"a", 1}}) + ": comment\n\n" + sse_done());
    REQUIRE(p.size() == 2);
    CHECK(p[0] == "{\"a\":1}");
    CHECK(p[1] == "[DONE]");
    CHECK_THROWS_AS(sse_payloads("data: x\n"), aff::Error);
    CHECK_THROWS_AS(sse_payloads("event x\n\n"), aff::Error);
}

TEST_CASE("invalid UTF-8 in an event is replaced, not thrown", "[serve]") {
    const std::string e = sse_event({{"text", std::string("a\xff")}});
    CHECK(e == "data: {\"text\":\"a\xEF\xBF\xBD\"}\n\n");
}
