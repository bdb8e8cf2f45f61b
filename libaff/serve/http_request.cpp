// Incremental HTTP/1.1 request parsing (see http_request.hpp). A line-oriented state
// machine for the header section and the chunk framing; body bytes are copied in
// runs. Every limit is checked before memory grows past it.
#include "libaff/serve/http_request.hpp"

#include <algorithm>
#include <cctype>

namespace aff::serve {
namespace {

constexpr std::size_t kMaxHeaders = 128;

bool is_tchar(unsigned char c) {
    if (std::isalnum(c)) return true;
    switch (c) {
        case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
        case '-': case '.': case '^': case '_': case '`': case '|': case '~':
            return true;
        default:
            return false;
    }
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// Comma-separated list contains token (case-insensitive).
bool list_has(std::string_view list, std::string_view token) {
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        if (iequals(trim(list.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k == name) return std::string_view(v);
    return std::nullopt;
}

void HttpRequestParser::reset() {
    state_ = State::need_more;
    phase_ = Phase::headers;
    request_ = HttpRequest{};
    line_.clear();
    header_bytes_ = 0;
    have_request_line_ = false;
    remaining_ = 0;
    error_status_ = 0;
    error_message_.clear();
}

bool HttpRequestParser::fail(int status, std::string message) {
    state_ = State::error;
    error_status_ = status;
    error_message_ = std::move(message);
    return false;
}

std::size_t HttpRequestParser::feed(std::string_view bytes) {
    std::size_t used = 0;
    while (used < bytes.size() && state_ == State::need_more) {
        const std::string_view rest = bytes.substr(used);
        if (phase_ == Phase::body_length || phase_ == Phase::chunk_data) {
            const std::size_t n = std::size_t(std::min<std::uint64_t>(remaining_, rest.size()));
            request_.body.append(rest.data(), n);
            remaining_ -= n;
            used += n;
            if (remaining_ == 0) {
                if (phase_ == Phase::body_length) {
                    phase_ = Phase::done;
                    state_ = State::complete;
                } else {
                    phase_ = Phase::chunk_data_end;
                }
            }
            continue;
        }
        // Line-oriented phases: take bytes up to and including the next LF.
        const std::size_t lf = rest.find('\n');
        const std::size_t take = lf == std::string_view::npos ? rest.size() : lf + 1;
        const std::size_t budget = limits_.max_header_bytes;
        if (phase_ == Phase::headers || phase_ == Phase::trailers) {
            header_bytes_ += take;
            if (header_bytes_ > budget) {
                fail(431, "request header section larger than " + std::to_string(budget) + " bytes");
                return used + take;
            }
        } else if (line_.size() + take > 1024) {
            fail(400, "chunk size line too long");
            return used + take;
        }
        line_.append(rest.data(), take);
        used += take;
        if (lf == std::string_view::npos) continue;
        std::string_view line(line_);
        line.remove_suffix(1);  // LF
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        bool ok = true;
        switch (phase_) {
            case Phase::headers:
            case Phase::trailers:
                ok = on_line(line);
                break;
            case Phase::chunk_size:
                ok = on_chunk_size_line(line);
                break;
            case Phase::chunk_data_end:
                if (!line.empty()) ok = fail(400, "chunk data longer than its size");
                else phase_ = Phase::chunk_size;
                break;
            default:
                break;
        }
        line_.clear();
        if (!ok) break;
    }
    return used;
}

bool HttpRequestParser::on_line(std::string_view line) {
    if (phase_ == Phase::trailers) {
        if (line.empty()) {
            phase_ = Phase::done;
            state_ = State::complete;
        }
        return true;  // trailer fields are read and dropped
    }
    if (!have_request_line_) {
        if (line.empty()) {  // RFC 9112 §2.2: ignore empty lines before the request line
            header_bytes_ = 0;
            return true;
        }
        const std::size_t sp1 = line.find(' ');
        const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
        if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
            return fail(400, "malformed request line");
        const std::string_view method = line.substr(0, sp1);
        const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
        const std::string_view version = line.substr(sp2 + 1);
        if (method.empty() || !std::all_of(method.begin(), method.end(), [](char c) { return is_tchar(c); }))
            return fail(400, "malformed request method");
        if (target.empty() || target.front() != '/')
            return fail(400, "request target must be an absolute path");
        for (char c : target)
            if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "control character in request target");
        if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
            version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
            return fail(400, "malformed HTTP version");
        if (version[5] != '1') return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
        request_.method = std::string(method);
        request_.target = std::string(target);
        request_.path = std::string(target.substr(0, target.find('?')));
        request_.version_minor = version[7] - '0';
        have_request_line_ = true;
        return true;
    }
    if (line.empty()) return on_headers_done();
    if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete header line folding");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail(400, "malformed header line");
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), [](char c) { return is_tchar(c); }))
        return fail(400, "malformed header name");
    const std::string_view value = trim(line.substr(colon + 1));
    for (char c : value) {
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && u != '\t') || u == 0x7f) return fail(400, "control character in header " + std::string(name));
    }
    if (request_.headers.size() >= kMaxHeaders) return fail(431, "more than " + std::to_string(kMaxHeaders) + " header fields");
    request_.headers.emplace_back(lower(name), std::string(value));
    return true;
}

bool HttpRequestParser::on_headers_done() {
    bool chunked = false;
    std::optional<std::uint64_t> length;
    bool close = false, keep_alive = false;
    for (const auto& [name, value] : request_.headers) {
        if (name == "transfer-encoding") {
            if (chunked || !iequals(trim(value), "chunked"))
                return fail(501, "transfer coding '" + value + "' is not supported (only chunked)");
            chunked = true;
        } else if (name == "content-length") {
            if (value.empty() || value.size() > 18 ||
                !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
                return fail(400, "malformed Content-Length");
            const std::uint64_t n = std::stoull(value);
            if (length && *length != n) return fail(400, "conflicting Content-Length headers");
            length = n;
        } else if (name == "connection") {
            close = close || list_has(value, "close");
            keep_alive = keep_alive || list_has(value, "keep-alive");
        }
    }
    request_.keep_alive = request_.version_minor >= 1 ? !close : (keep_alive && !close);
    if (chunked && length) return fail(400, "both Content-Length and Transfer-Encoding");
    if (chunked && request_.version_minor == 0) return fail(400, "chunked transfer coding in an HTTP/1.0 request");
    header_bytes_ = 0;
    if (chunked) {
        phase_ = Phase::chunk_size;
        return true;
    }
    if (length && *length > limits_.max_body_bytes)
        return fail(413, "request body of " + std::to_string(*length) + " bytes is over the limit of " +
                             std::to_string(limits_.max_body_bytes));
    if (length && *length > 0) {
        remaining_ = *length;
        request_.body.reserve(std::size_t(*length));
        phase_ = Phase::body_length;
        return true;
    }
    phase_ = Phase::done;
    state_ = State::complete;
    return true;
}

bool HttpRequestParser::on_chunk_size_line(std::string_view line) {
    const std::string_view size = trim(line.substr(0, line.find(';')));
    if (size.empty() || size.size() > 15) return fail(400, "malformed chunk size");
    std::uint64_t n = 0;
    for (char c : size) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return fail(400, "malformed chunk size");
        n = n * 16 + std::uint64_t(d);
    }
    if (n == 0) {
        phase_ = Phase::trailers;
        return true;
    }
    if (request_.body.size() + n > limits_.max_body_bytes)
        return fail(413, "request body is over the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
    remaining_ = n;
    phase_ = Phase::chunk_data;
    return true;
}

std::string_view http_reason(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 413: return "Content Too Large";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        case 505: return "HTTP Version Not Supported";
        default: return "";
    }
}

}  // namespace aff::serve
