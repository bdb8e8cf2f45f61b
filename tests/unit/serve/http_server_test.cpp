// Tests for libaff/serve/http_server on loopback: keep-alive, chunked streaming,
// 100-continue, the request timeout (408), and the disconnect check used to stop a
// generation. A tiny handler stands in for the OpenAI service.
#include "libaff/serve/http_server.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <vector>
#include <unistd.h>

using namespace aff::serve;
using namespace std::chrono_literals;

namespace {

struct EchoHandler : HttpHandler {
    std::atomic<int> gone_seen{0};
    void handle(const HttpRequest& r, HttpResponse& out) override {
        if (r.path == "/stream") {
            out.start_stream(200, "text/plain");
            out.write("one");
            out.write("two");
            out.end_stream();
        } else if (r.path == "/wait-for-close") {
            out.start_stream(200, "text/plain");
            out.write("x");
            for (int i = 0; i < 400 && !out.client_gone(); ++i) std::this_thread::sleep_for(5ms);
            if (out.client_gone()) ++gone_seen;
            out.end_stream();
        } else {
            out.send(200, "text/plain", r.method + " " + r.path + " " + r.body);
        }
    }
    void reject(const HttpRequest&, int status, const std::string& message, HttpResponse& out) override {
        out.send(status, "text/plain", message);
    }
};

int connect_to(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return fd;
}

void send_all(int fd, const std::string& s) { REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size())); }

// Reads until `needle` has arrived (or the peer closes / 3 s pass).
std::string read_until(int fd, const std::string& needle) {
    std::string got;
    char buf[4096];
    const auto end = std::chrono::steady_clock::now() + 3s;
    while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < end) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, std::size_t(n));
    }
    return got;
}

struct Running {
    EchoHandler handler;
    HttpServer server;
    std::thread thread;
    explicit Running(HttpServerOptions o) : server((o.port = 0, o), handler), thread([this] { server.run(); }) {}
    ~Running() {
        server.stop();
        thread.join();
    }
};

}  // namespace

TEST_CASE("two requests share one keep-alive connection", "[serve]") {
    Running s({});
    const int fd = connect_to(s.server.port());
    send_all(fd, "POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
    CHECK(read_until(fd, "POST /a hi").find("Content-Length: 10\r\n") != std::string::npos);
    send_all(fd, "GET /b HTTP/1.1\r\nConnection: close\r\n\r\n");
    const std::string second = read_until(fd, "GET /b ");
    CHECK(second.find("Connection: close") != std::string::npos);
    CHECK(second.find("GET /b ") != std::string::npos);
    ::close(fd);
}

TEST_CASE("a streamed response is chunked and terminated", "[serve]") {
    Running s({});
    const int fd = connect_to(s.server.port());
    send_all(fd, "GET /stream HTTP/1.1\r\n\r\n");
    const std::string r = read_until(fd, "0\r\n\r\n");
    CHECK(r.find("Transfer-Encoding: chunked") != std::string::npos);
    CHECK(r.substr(r.find("\r\n\r\n") + 4) == "3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n");
    ::close(fd);
}

TEST_CASE("Expect: 100-continue gets an interim response before the body", "[serve]") {
    Running s({});
    const int fd = connect_to(s.server.port());
    send_all(fd, "POST /c HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    CHECK(read_until(fd, "100 Continue\r\n\r\n").rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0);
    send_all(fd, "abc");
    CHECK(read_until(fd, "POST /c abc").find("200 OK") != std::string::npos);
    ::close(fd);
}

TEST_CASE("a request that stalls gets 408 and the connection closes", "[serve]") {
    HttpServerOptions o;
    o.request_timeout_ms = 200;
    Running s(o);
    const int fd = connect_to(s.server.port());
    send_all(fd, "POST /slow HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
    const auto t0 = std::chrono::steady_clock::now();
    const std::string r = read_until(fd, "never");
    CHECK(r.rfind("HTTP/1.1 408 ", 0) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    ::close(fd);
}

TEST_CASE("a client that closes mid-stream is noticed by client_gone", "[serve]") {
    Running s({});
    const int fd = connect_to(s.server.port());
    send_all(fd, "GET /wait-for-close HTTP/1.1\r\n\r\n");
    read_until(fd, "\r\nx\r\n");
    ::close(fd);
    for (int i = 0; i < 200 && s.handler.gone_seen == 0; ++i) std::this_thread::sleep_for(5ms);
    CHECK(s.handler.gone_seen == 1);
}

TEST_CASE("an oversized body is refused with 413 before it is read", "[serve]") {
    HttpServerOptions o;
    o.limits.max_body_bytes = 100;
    Running s(o);
    const int fd = connect_to(s.server.port());
    send_all(fd, "POST /big HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + std::string(500, 'a'));
    CHECK(read_until(fd, "limit").rfind("HTTP/1.1 413 ", 0) == 0);
    ::close(fd);
}

// ---- connections as a bounded resource (issue: 256 idle sockets locked every client out)

namespace {

// Waits up to `wait` for the peer to close; true when it did.
bool closed_by_peer(int fd, std::chrono::milliseconds wait = 3s) {
    char buf[256];
    const auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("a connection that sends nothing is closed after the header timeout", "[serve]") {
    HttpServerOptions o;
    o.header_timeout_ms = 200;
    Running s(o);
    const int fd = connect_to(s.server.port());
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(closed_by_peer(fd));
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    ::close(fd);
}

TEST_CASE("a request head sent too slowly gets 408 after the header timeout", "[serve]") {
    HttpServerOptions o;
    o.header_timeout_ms = 200;
    o.request_timeout_ms = 10000;
    Running s(o);
    const int fd = connect_to(s.server.port());
    send_all(fd, "GET /slow HTTP/1.1\r\nHost: x\r\n");
    const auto t0 = std::chrono::steady_clock::now();
    const std::string r = read_until(fd, "never");
    CHECK(r.rfind("HTTP/1.1 408 ", 0) == 0);
    CHECK(r.find("request head not received within 200 ms") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    ::close(fd);
}

TEST_CASE("idle connections at the cap make room for a client with a request", "[serve]") {
    HttpServerOptions o;
    o.max_connections = 4;
    Running s(o);
    std::vector<int> idle;
    for (int i = 0; i < 4; ++i) idle.push_back(connect_to(s.server.port()));
    for (int i = 0; i < 100 && s.server.open_connections() < 4; ++i) std::this_thread::sleep_for(5ms);
    REQUIRE(s.server.open_connections() == 4);
    const int fd = connect_to(s.server.port());
    send_all(fd, "GET /hello HTTP/1.1\r\n\r\n");
    CHECK(read_until(fd, "/hello").rfind("HTTP/1.1 200 ", 0) == 0);
    // One idle connection gave up its place, and only one.
    int closed = 0;
    for (int f : idle) closed += closed_by_peer(f, 300ms);
    CHECK(closed == 1);
    for (int f : idle) ::close(f);
    ::close(fd);
}

TEST_CASE("one address gets at most its share of busy connections", "[serve]") {
    HttpServerOptions o;
    o.max_connections_per_address = 2;
    Running s(o);
    int busy[2];
    for (int& b : busy) {
        b = connect_to(s.server.port());
        send_all(b, "GET /wait-for-close HTTP/1.1\r\n\r\n");
        read_until(b, "\r\nx\r\n");
    }
    const int third = connect_to(s.server.port());
    const std::string r = read_until(third, "connections");
    CHECK(r.rfind("HTTP/1.1 503 ", 0) == 0);
    for (int b : busy) ::close(b);
    ::close(third);
}

TEST_CASE("drain stops accepting, closes idle connections and lets a running request finish", "[serve]") {
    Running s({});
    const std::uint16_t port = s.server.port();
    const int running = connect_to(port);
    send_all(running, "GET /wait-for-close HTTP/1.1\r\n\r\n");
    read_until(running, "\r\nx\r\n");
    const int idle = connect_to(port);
    for (int i = 0; i < 100 && s.server.open_connections() < 2; ++i) std::this_thread::sleep_for(5ms);
    std::thread drainer([&] { s.server.drain(5000); });
    CHECK(closed_by_peer(idle));
    // No new connection is accepted (the listening socket is closed).
    bool refused = false;
    for (int i = 0; i < 100 && !refused; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        refused = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0;
        ::close(fd);
        if (!refused) std::this_thread::sleep_for(10ms);
    }
    CHECK(refused);
    // The running request still streams: its end comes when the client leaves.
    for (int i = 0; i < 100 && s.server.open_connections() > 1; ++i) std::this_thread::sleep_for(5ms);
    CHECK(s.server.open_connections() == 1);
    ::close(running);
    drainer.join();
    CHECK(s.server.open_connections() == 0);
    ::close(idle);
}
