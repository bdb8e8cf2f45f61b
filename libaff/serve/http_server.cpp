// The socket side of the HTTP server (see http_server.hpp): accept loop, one thread
// per connection, deadlines through poll(2), chunked streaming, disconnect checks.
#include "libaff/serve/http_server.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace aff::serve {
namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : int(left);
}

// Closing a socket that still has unread input makes the kernel send a reset, which
// can destroy the error response a client has not read yet (a 413 sent before the
// body arrived, say). Half-close first and drain what the client still sends, briefly.
void lingering_close(int fd, int timeout_ms) {
    ::shutdown(fd, SHUT_WR);
    char sink[16384];
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::size_t drained = 0;
    while (drained < (std::size_t(4) << 20)) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, ms_until(deadline)) <= 0) break;
        const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
        if (n <= 0) break;
        drained += std::size_t(n);
    }
    ::close(fd);
}

}  // namespace

// ---- HttpResponse ---------------------------------------------------------------

HttpResponse::HttpResponse(int fd, const HttpRequest& request, int write_timeout_ms)
    : fd_(fd),
      version_minor_(request.version_minor),
      head_only_(request.method == "HEAD"),
      write_timeout_ms_(write_timeout_ms),
      keep_alive_(request.keep_alive) {}

bool HttpResponse::write_all(std::string_view data) {
    if (failed_) return false;
    const auto deadline = Clock::now() + std::chrono::milliseconds(write_timeout_ms_);
    while (!data.empty()) {
        const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            data.remove_prefix(std::size_t(n));
            bytes_sent_ += std::uint64_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd_, POLLOUT, 0};
            const int r = ::poll(&p, 1, ms_until(deadline));
            if (r > 0 && !(p.revents & (POLLERR | POLLHUP))) continue;
            if (r < 0 && errno == EINTR) continue;
        }
        failed_ = true;
        return false;
    }
    return true;
}

std::string HttpResponse::head(int status, std::string_view content_type, const HttpHeaders& extra, bool chunked,
                               std::size_t length) {
    std::string h = "HTTP/1." + std::to_string(version_minor_) + " " + std::to_string(status) + " " +
                    std::string(http_reason(status)) + "\r\n";
    if (!content_type.empty()) h += "Content-Type: " + std::string(content_type) + "\r\n";
    if (chunked) h += "Transfer-Encoding: chunked\r\n";
    else if (length != std::size_t(-1)) h += "Content-Length: " + std::to_string(length) + "\r\n";
    for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
    for (const auto& [k, v] : always_) h += k + ": " + v + "\r\n";
    h += keep_alive_ ? (version_minor_ == 0 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n";
    h += "\r\n";
    return h;
}

bool HttpResponse::send(int status, std::string_view content_type, std::string_view body, const HttpHeaders& extra) {
    if (started_) return false;
    started_ = true;
    status_ = status;
    std::string out = head(status, content_type, extra, false, body.size());
    if (!head_only_) out.append(body);
    return write_all(out);
}

bool HttpResponse::start_stream(int status, std::string_view content_type, const HttpHeaders& extra) {
    if (started_) return false;
    started_ = true;
    streaming_ = true;
    status_ = status;
    // HTTP/1.0 has no chunked coding: the body ends when the connection does.
    if (version_minor_ == 0) keep_alive_ = false;
    return write_all(head(status, content_type, extra, version_minor_ >= 1, std::size_t(-1)));
}

bool HttpResponse::write(std::string_view data) {
    if (!streaming_ || data.empty()) return !failed_;
    if (head_only_) return true;
    if (version_minor_ == 0) return write_all(data);
    char size[32];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string chunk(size, std::size_t(n));
    chunk.append(data);
    chunk += "\r\n";
    return write_all(chunk);
}

bool HttpResponse::end_stream() {
    if (!streaming_) return false;
    streaming_ = false;
    if (head_only_ || version_minor_ == 0) return !failed_;
    return write_all("0\r\n\r\n");
}

bool HttpResponse::client_gone() {
    if (failed_) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
        failed_ = true;
        return true;
    }
    return false;
}

// ---- HttpServer -----------------------------------------------------------------

HttpServer::HttpServer(HttpServerOptions options, HttpHandler& handler)
    : options_(std::move(options)), handler_(handler) {
    const std::string where = options_.host + ":" + std::to_string(options_.port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string port_text = std::to_string(options_.port);
    const int gai = ::getaddrinfo(options_.host.c_str(), port_text.c_str(), &hints, &found);
    if (gai != 0) throw_io(std::string("cannot resolve listen address: ") + ::gai_strerror(gai), where);
    int last_errno = 0;
    for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) { last_errno = errno; continue; }
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
            listen_fd_ = fd;
        } else {
            last_errno = errno;
            ::close(fd);
        }
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) throw_errno("cannot listen", where, last_errno);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
        const int e = errno;
        ::close(listen_fd_);
        throw_errno("cannot create pipe", where, e);
    }
}

HttpServer::~HttpServer() {
    stop();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    for (int fd : wake_pipe_)
        if (fd >= 0) ::close(fd);
}

void HttpServer::stop() {
    if (stopping_.exchange(true)) return;
    const char c = 'x';
    [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &c, 1);
    std::lock_guard lock(mutex_);
    for (const auto& [fd, c] : open_) ::shutdown(fd, SHUT_RDWR);
}

void HttpServer::drain(int grace_ms) {
    std::unique_lock lock(mutex_);
    if (!draining_.exchange(true)) {
        const char c = 'x';
        [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &c, 1);
        for (auto& [fd, c] : open_)
            if (c.idle && !c.evicted) {
                c.evicted = true;
                ::shutdown(fd, SHUT_RDWR);
            }
    }
    idle_.wait_for(lock, std::chrono::milliseconds(grace_ms), [&] { return threads_ == 0; });
}

std::size_t HttpServer::open_connections() const {
    std::lock_guard lock(mutex_);
    return open_.size();
}

bool HttpServer::set_idle(int fd, bool idle) {
    std::lock_guard lock(mutex_);
    Connection& c = open_.at(fd);
    c.idle = idle;
    if (idle) c.idle_since = Clock::now();
    return !(idle && (draining_ || c.evicted));
}

bool HttpServer::make_room(const std::string& address) {
    std::size_t total = 0, from_address = 0;
    for (const auto& [fd, c] : open_) {
        if (c.evicted) continue;
        ++total;
        if (c.address == address) ++from_address;
    }
    const bool address_full = from_address >= options_.max_connections_per_address;
    if (total < options_.max_connections && !address_full) return true;
    Connection* oldest = nullptr;
    int oldest_fd = -1;
    for (auto& [fd, c] : open_) {
        if (c.evicted || !c.idle || (address_full && c.address != address)) continue;
        if (!oldest || c.idle_since < oldest->idle_since) oldest = &c, oldest_fd = fd;
    }
    if (!oldest) return false;
    oldest->evicted = true;
    ::shutdown(oldest_fd, SHUT_RDWR);  // its thread sees the end of input and closes it
    return true;
}

namespace {

std::string peer_address(const sockaddr_storage& peer) {
    char text[INET6_ADDRSTRLEN] = "?";
    if (peer.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, text, sizeof text);
    else if (peer.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr, text, sizeof text);
    return text;
}

}  // namespace

void HttpServer::run() {
    while (!stopping_ && !draining_) {
        pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents) break;
        if (!(p[0].revents & POLLIN)) continue;
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
        if (fd < 0) continue;  // ECONNABORTED, EMFILE: keep serving the others
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        const std::string address = peer_address(peer);
        std::unique_lock lock(mutex_);
        if (stopping_ || draining_ || !make_room(address)) {
            lock.unlock();
            HttpRequest none;
            none.keep_alive = false;
            HttpResponse response(fd, none, 1000);
            handler_.reject(none, 503, "too many open connections", response);
            lingering_close(fd, 50);
            continue;
        }
        Connection& c = open_[fd];
        c.address = address;
        c.idle_since = Clock::now();
        ++threads_;
        lock.unlock();
        std::thread([this, fd] {
            serve_connection(fd);
            {
                std::lock_guard guard(mutex_);
                open_.erase(fd);
            }
            lingering_close(fd, 1000);
            std::lock_guard guard(mutex_);
            --threads_;
            idle_.notify_all();
        }).detach();
    }
    // No more connections: a client connecting now is refused by the kernel, not queued.
    ::close(listen_fd_);
    listen_fd_ = -1;
    std::unique_lock lock(mutex_);
    if (!draining_) {
        stopping_ = true;
        for (const auto& [fd, c] : open_) ::shutdown(fd, SHUT_RDWR);
    }
    idle_.wait(lock, [&] { return threads_ == 0; });
}

void HttpServer::serve_connection(int fd) {
    HttpRequestParser parser(options_.limits);
    std::string buffer;
    char chunk[16384];
    const int head_ms = std::min(options_.header_timeout_ms, options_.request_timeout_ms);
    // A new connection gets the header timeout to send its first request; a kept-alive
    // one gets the idle timeout between requests.
    Clock::time_point idle_deadline = Clock::now() + std::chrono::milliseconds(head_ms);
    while (!stopping_) {
        bool continue_sent = false;
        bool idle = true;  // as the server has it (set_idle)
        Clock::time_point request_deadline{}, head_deadline{};
        auto begin_request = [&] {
            if (request_deadline != Clock::time_point{}) return;
            const auto now = Clock::now();
            request_deadline = now + std::chrono::milliseconds(options_.request_timeout_ms);
            head_deadline = now + std::chrono::milliseconds(head_ms);
            if (idle) set_idle(fd, false);
            idle = false;
        };
        while (parser.state() == HttpRequestParser::State::need_more) {
            if (!buffer.empty()) {
                begin_request();
                buffer.erase(0, parser.feed(buffer));
                if (parser.state() != HttpRequestParser::State::need_more) break;
            }
            if (parser.headers_complete() && !continue_sent) {
                const auto expect = parser.request().header("expect");
                if (expect && (*expect == "100-continue" || *expect == "100-Continue") &&
                    parser.request().version_minor >= 1) {
                    const std::string line = "HTTP/1.1 100 Continue\r\n\r\n";
                    if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) < 0) return;
                }
                continue_sent = true;
            }
            const bool in_request = parser.started() || !buffer.empty();
            // Closed to make room, or the server is draining: no new request here.
            if (!in_request && !set_idle(fd, true)) return;
            const bool head_done = parser.headers_complete();
            const Clock::time_point deadline = !in_request ? idle_deadline
                                               : head_done  ? request_deadline
                                                            : std::min(request_deadline, head_deadline);
            pollfd p{fd, POLLIN, 0};
            const int r = ::poll(&p, 1, ms_until(deadline));
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) {
                if (in_request) {
                    HttpRequest partial = parser.request();
                    partial.keep_alive = false;
                    HttpResponse response(fd, partial, options_.write_timeout_ms);
                    const std::string what = head_done ? "request not received within " +
                                                             std::to_string(options_.request_timeout_ms) + " ms"
                                                       : "request head not received within " +
                                                             std::to_string(head_ms) + " ms";
                    handler_.reject(partial, 408, what, response);
                }
                return;
            }
            if (r < 0) return;
            const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
            if (n <= 0) {
                if (n < 0 && errno == EINTR) continue;
                return;  // peer closed or reset; a partial request gets no answer
            }
            begin_request();
            buffer.append(chunk, std::size_t(n));
        }
        if (parser.state() == HttpRequestParser::State::error) {
            HttpRequest partial = parser.request();
            partial.keep_alive = false;
            HttpResponse response(fd, partial, options_.write_timeout_ms);
            handler_.reject(partial, parser.error_status(), parser.error_message(), response);
            return;
        }
        const HttpRequest request = parser.take_request();
        parser.reset();
        HttpResponse response(fd, request, options_.write_timeout_ms);
        if (draining_) response.close_after();
        handler_.handle(request, response);
        if (!response.started()) {
            response.close_after();
            handler_.reject(request, 500, "handler sent no response", response);
        }
        if (!response.keep_alive() || draining_) return;
        idle_deadline = Clock::now() + std::chrono::milliseconds(options_.idle_timeout_ms);
    }
}

}  // namespace aff::serve
