// An incremental HTTP/1.1 request parser: bytes in (as they arrive from a socket),
// requests out. It knows nothing about sockets, so the fuzz target
// (tests/fuzz/http_request_fuzz.cpp) and the unit tests drive it directly.
// Accepts Content-Length and chunked bodies (RFC 9112 §6-7), enforces a header-size
// and a body-size limit, and rejects what would let two parties disagree about where
// a request ends (both framings at once, repeated or malformed lengths, obs-fold).
// It never throws: a bad request is reported as an HTTP status and a reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aff::serve {

struct HttpLimits {
    std::size_t max_header_bytes = 64 * 1024;        // request line + headers
    std::size_t max_body_bytes = 16 * 1024 * 1024;   // decoded body
};

struct HttpRequest {
    std::string method;
    std::string target;        // as sent: path plus optional ?query
    std::string path;          // target before '?'
    int version_minor = 1;     // HTTP/1.<minor>
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
    std::string body;
    bool keep_alive = true;    // after this request, may the connection serve another?

    // First value of a header (name lower-case), if present.
    std::optional<std::string_view> header(std::string_view name) const;
};

class HttpRequestParser {
public:
    enum class State { need_more, complete, error };

    explicit HttpRequestParser(HttpLimits limits = {}) : limits_(limits) {}

    // Consumes bytes up to the end of the current request (never beyond it, so
    // pipelined requests stay in the caller's buffer); returns how many were used.
    std::size_t feed(std::string_view bytes);

    State state() const { return state_; }
    // True once the request line and headers are in (the body may still be coming):
    // the server answers `Expect: 100-continue` at that point.
    bool headers_complete() const { return phase_ > Phase::headers; }
    // True while the parser holds a partial request (used to tell an idle connection
    // from one that stalls mid-request).
    bool started() const { return phase_ != Phase::headers || !line_.empty() || header_bytes_ > 0; }

    const HttpRequest& request() const { return request_; }
    HttpRequest take_request() { return std::move(request_); }
    // For State::error: the status to answer (400, 413, 431, 501, 505) and why.
    int error_status() const { return error_status_; }
    const std::string& error_message() const { return error_message_; }

    // Starts over for the next request on the same connection.
    void reset();

private:
    enum class Phase { headers, body_length, chunk_size, chunk_data, chunk_data_end, trailers, done };

    bool fail(int status, std::string message);
    bool on_line(std::string_view line);  // a complete header-section line (no CRLF)
    bool on_headers_done();
    bool on_chunk_size_line(std::string_view line);

    HttpLimits limits_;
    State state_ = State::need_more;
    Phase phase_ = Phase::headers;
    HttpRequest request_;
    std::string line_;             // partial line being assembled
    std::size_t header_bytes_ = 0;
    bool have_request_line_ = false;
    std::uint64_t remaining_ = 0;  // body bytes (length framing) or chunk bytes left
    int error_status_ = 0;
    std::string error_message_;
};

// "Bad Request" etc.; an empty string for codes this server never sends.
std::string_view http_reason(int status);

}  // namespace aff::serve
