// Tests for libaff/serve/http_request: framing (Content-Length, chunked, pipelining,
// byte-at-a-time input), keep-alive rules and each rejection with its status.
#include "libaff/serve/http_request.hpp"

#include <catch2/catch.hpp>

#include <string>

using aff::serve::HttpLimits;
using aff::serve::HttpRequestParser;
using State = HttpRequestParser::State;

namespace {
HttpRequestParser parse_all(const std::string& bytes, HttpLimits limits = {}) {
    HttpRequestParser p(limits);
    p.feed(bytes);
    return p;
}
}  // namespace

TEST_CASE("a request with a Content-Length body parses, in one piece or byte by byte", "[serve]") {
    const std::string raw =
        "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
        "Content-Length: 7\r\n\r\n{\"a\":1}";
    auto check = [](const HttpRequestParser& p) {
        REQUIRE(p.state() == State::complete);
        CHECK(p.request().method == "POST");
        CHECK(p.request().path == "/v1/chat/completions");
        CHECK(p.request().target == "/v1/chat/completions?x=1");
        CHECK(p.request().body == "{\"a\":1}");
        CHECK(p.request().header("content-type") == "application/json");
        CHECK(p.request().keep_alive);
    };
    check(parse_all(raw));
    HttpRequestParser p;
    for (char c : raw) p.feed(std::string_view(&c, 1));
    check(p);
}

TEST_CASE("a chunked body is decoded and trailers are skipped", "[serve]") {
    const auto p = parse_all(
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n");
    REQUIRE(p.state() == State::complete);
    CHECK(p.request().body == "Wikipedia");
}

TEST_CASE("pipelined requests are consumed one at a time", "[serve]") {
    const std::string two = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n";
    HttpRequestParser p;
    const std::size_t used = p.feed(two);
    REQUIRE(p.state() == State::complete);
    CHECK(p.request().path == "/a");
    CHECK(used == two.find("GET /b"));
    p.reset();
    p.feed(std::string_view(two).substr(used));
    REQUIRE(p.state() == State::complete);
    CHECK(p.request().path == "/b");
    CHECK_FALSE(p.request().keep_alive);
}

TEST_CASE("HTTP/1.0 closes unless keep-alive is asked for", "[serve]") {
    CHECK_FALSE(parse_all("GET / HTTP/1.0\r\n\r\n").request().keep_alive);
    CHECK(parse_all("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request().keep_alive);
}

TEST_CASE("bad requests are rejected with the right status", "[serve]") {
    struct Case {
        const char* raw;
        int status;
        const char* says;
    };
    const Case cases[] = {
        {"GET / HTTP/1.1 extra\r\n\r\n", 400, "request line"},
        {"GET noslash HTTP/1.1\r\n\r\n", 400, "absolute path"},
        {"GET / HTTP/2.0\r\n\r\n", 505, "HTTP/1.0"},
        {"GET / HTTX/1.1\r\n\r\n", 400, "version"},
        {"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400, "header name"},
        {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400, "folding"},
        {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "header line"},
        {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, "Content-Length"},
        {"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", 400, "conflicting"},
        {"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "gzip"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "chunk size"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400, "longer than its size"},
    };
    for (const auto& c : cases) {
        INFO(c.raw);
        const auto p = parse_all(c.raw);
        REQUIRE(p.state() == State::error);
        CHECK(p.error_status() == c.status);
        CHECK_THAT(p.error_message(), Catch::Contains(c.says));
    }
}

TEST_CASE("size limits give 431 for headers and 413 for bodies, before buffering them", "[serve]") {
    HttpLimits limits;
    limits.max_header_bytes = 100;
    limits.max_body_bytes = 10;
    auto p = parse_all("GET / HTTP/1.1\r\nX: " + std::string(200, 'a') + "\r\n\r\n", limits);
    CHECK(p.state() == State::error);
    CHECK(p.error_status() == 431);
    p = parse_all("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", limits);
    CHECK(p.error_status() == 413);
    p = parse_all("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n", limits);
    CHECK(p.error_status() == 413);
    CHECK(p.request().body == "abcdef");
}

TEST_CASE("an incomplete request waits for more and reports that it has started", "[serve]") {
    HttpRequestParser p;
    CHECK_FALSE(p.started());
    p.feed("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab");
    CHECK(p.state() == State::need_more);
    CHECK(p.started());
    CHECK(p.headers_complete());
    p.feed("cde");
    CHECK(p.state() == State::complete);
}
