// A small HTTP/1.1 server on POSIX sockets: one thread per connection (bounded),
// keep-alive and pipelining, a deadline for receiving each request and for every
// write, `Expect: 100-continue`, plain and streamed (chunked) responses, and a cheap
// check for a client that has gone away, so a long generation can stop at once.
// Request bytes are parsed by http_request.hpp; what to answer is the handler's job
// (libaff/serve/service.cpp maps the OpenAI API onto it).
//
// Why not a library: Debian 12 ships cpp-httplib 0.11, but its streaming API does
// not report a disconnected client until a write fails (which TCP may delay for many
// tokens), and the request parser is the part that must be fuzzed; owning ~500 lines
// keeps both under our control.
#pragma once

#include "libaff/serve/http_request.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aff::serve {

// Connections are a bounded resource that idle clients must not be able to hold:
// a new connection has header_timeout_ms to send a complete request head (a request
// head once begun, too), and when every slot (or every slot of one address) is taken,
// the connection idle longest (no request in flight) is closed to make room. Only when
// none is idle does a new connection get 503.
struct HttpServerOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;        // 0 = any free port (see HttpServer::port())
    HttpLimits limits;
    int header_timeout_ms = 10000;    // to send a request head (capped by request_timeout_ms)
    int request_timeout_ms = 30000;   // to receive one whole request once it has begun
    int idle_timeout_ms = 60000;      // keep-alive connection with no request in flight
    int write_timeout_ms = 30000;     // a client that reads nothing for this long is dropped
    std::size_t max_connections = 256;
    std::size_t max_connections_per_address = 128;  // from one client address
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// What a handler writes its answer to. Exactly one of send() or start_stream() ...
// end_stream() per request. Every call returns false once the client is gone (or
// stalled past the write timeout); the handler should then stop work.
class HttpResponse {
public:
    HttpResponse(int fd, const HttpRequest& request, int write_timeout_ms);

    bool send(int status, std::string_view content_type, std::string_view body, const HttpHeaders& extra = {});
    bool start_stream(int status, std::string_view content_type, const HttpHeaders& extra = {});
    bool write(std::string_view data);
    bool end_stream();
    // Non-blocking: has the peer closed its side or reset the connection? Bytes of a
    // pipelined next request do not count as gone.
    bool client_gone();
    // After this response the connection is closed (the server calls it for errors
    // after which the rest of the input cannot be trusted).
    void close_after() { keep_alive_ = false; }
    // The client left before any answer: send nothing and close the connection.
    void abandon() {
        started_ = true;
        keep_alive_ = false;
    }

    // A header for whatever this response turns out to be (CORS headers, added before routing).
    void add_header(std::string name, std::string value) { always_.emplace_back(std::move(name), std::move(value)); }

    bool started() const { return started_; }
    bool keep_alive() const { return keep_alive_ && !failed_; }
    int status() const { return status_; }
    std::uint64_t bytes_sent() const { return bytes_sent_; }

private:
    bool write_all(std::string_view data);
    std::string head(int status, std::string_view content_type, const HttpHeaders& extra, bool chunked,
                     std::size_t length);

    int fd_;
    int version_minor_;
    bool head_only_;
    int write_timeout_ms_;
    bool keep_alive_;
    bool started_ = false;
    bool streaming_ = false;
    bool failed_ = false;
    int status_ = 0;
    std::uint64_t bytes_sent_ = 0;
    HttpHeaders always_;
};

class HttpHandler {
public:
    virtual ~HttpHandler() = default;
    virtual void handle(const HttpRequest& request, HttpResponse& response) = 0;
    // A request that could not be parsed (status 400, 408, 413, 431, 501, 505) or a
    // connection refused because too many are open (503). `request` holds whatever
    // was parsed (maybe nothing).
    virtual void reject(const HttpRequest& request, int status, const std::string& message, HttpResponse& response) = 0;
};

class HttpServer {
public:
    // Binds and listens; throws aff::Error (io) naming host:port on failure.
    HttpServer(HttpServerOptions options, HttpHandler& handler);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    std::uint16_t port() const { return port_; }
    // Accepts until stop(); returns after every connection thread has finished.
    void run();
    // From any thread: stop accepting, close open connections.
    void stop();
    // From any thread, for a graceful shutdown: stop accepting (the listening socket is
    // closed), close idle connections, let requests in flight finish, each connection
    // closing after its current response. Returns once none is left or after `grace_ms`
    // (then the caller decides: cut the work short, stop()).
    void drain(int grace_ms);
    // Open connections (for tests and /metrics).
    std::size_t open_connections() const;

private:
    struct Connection {
        std::string address;
        bool idle = true;  // waiting for a request, nothing of one received
        std::chrono::steady_clock::time_point idle_since;
        bool evicted = false;
    };
    void serve_connection(int fd);
    // Records whether the connection waits for a request; false when it must close
    // instead (made room for another, or the server drains).
    bool set_idle(int fd, bool idle);
    // Under mutex_: makes room for a connection from `address` by closing the longest
    // idle one; false when every connection (of that address, at its cap) is busy.
    bool make_room(const std::string& address);

    HttpServerOptions options_;
    HttpHandler& handler_;
    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};
    std::uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> draining_{false};
    mutable std::mutex mutex_;
    std::condition_variable idle_;
    std::map<int, Connection> open_;  // by socket
    std::size_t threads_ = 0;  // connection threads still running
};

}  // namespace aff::serve
