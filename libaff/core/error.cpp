// Construction and rendering of aff::Error (see error.hpp for why it looks like this).
#include "libaff/core/error.hpp"

#include <cstring>

namespace aff {

std::string_view to_string(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::io: return "io";
        case ErrorKind::format: return "format";
        case ErrorKind::unsupported: return "unsupported";
        case ErrorKind::usage: return "usage";
        case ErrorKind::device: return "device";
        case ErrorKind::internal: return "internal";
    }
    return "internal";
}

Error::Error(ErrorKind kind, std::string message, std::string path)
    : kind_(kind), message_(std::move(message)), path_(std::move(path)) {
    render();
}

Error& Error::add_context(std::string what) {
    context_.insert(context_.begin(), std::move(what));
    render();
    return *this;
}

Error& Error::set_path_if_empty(std::string path) {
    if (path_.empty()) {
        path_ = std::move(path);
        render();
    }
    return *this;
}

void Error::render() {
    text_.clear();
    if (!path_.empty()) text_ += path_ + ": ";
    for (const std::string& c : context_) text_ += c + ": ";
    if (kind_ == ErrorKind::internal) text_ += "internal error: ";
    text_ += message_;
}

void throw_format(std::string message, std::string path) {
    throw Error(ErrorKind::format, std::move(message), std::move(path));
}
void throw_io(std::string message, std::string path) {
    throw Error(ErrorKind::io, std::move(message), std::move(path));
}
void throw_errno(std::string message, std::string path, int errno_value) {
    throw Error(ErrorKind::io, std::move(message) + ": " + std::strerror(errno_value), std::move(path));
}
void throw_unsupported(std::string message, std::string path) {
    throw Error(ErrorKind::unsupported, std::move(message), std::move(path));
}
void throw_usage(std::string message) { throw Error(ErrorKind::usage, std::move(message)); }
void throw_internal(std::string message) { throw Error(ErrorKind::internal, std::move(message)); }

}  // namespace aff
