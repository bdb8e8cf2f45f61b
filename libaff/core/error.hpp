// The one exception type libaff throws. It carries a kind, the file it concerns and a
// context list that each layer extends before rethrowing, so a tool can print one line
// such as "model.aff: layer 3 expert 17: extent offset 0x7f3000 not aligned to 4096".
// libaff never prints or exits; the tools turn an Error into a message and exit status
// (libaff/ui/cli.cpp).
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace aff {

enum class ErrorKind { io, format, unsupported, usage, device, internal };

std::string_view to_string(ErrorKind kind);

class Error : public std::exception {
public:
    Error(ErrorKind kind, std::string message, std::string path = {});

    ErrorKind kind() const { return kind_; }
    const std::string& path() const { return path_; }
    const std::string& message() const { return message_; }
    // Outermost context first, as it is printed.
    const std::vector<std::string>& context() const { return context_; }

    // Callers catching an Error to add where it happened prepend their context, so the
    // printed chain reads from the general (file) to the specific (field).
    Error& add_context(std::string what);
    Error& set_path_if_empty(std::string path);

    const char* what() const noexcept override { return text_.c_str(); }

private:
    void render();

    ErrorKind kind_;
    std::string message_;
    std::string path_;
    std::vector<std::string> context_;
    std::string text_;
};

[[noreturn]] void throw_format(std::string message, std::string path = {});
[[noreturn]] void throw_io(std::string message, std::string path = {});
// Appends strerror(errno_value) to the message.
[[noreturn]] void throw_errno(std::string message, std::string path, int errno_value);
[[noreturn]] void throw_unsupported(std::string message, std::string path = {});
[[noreturn]] void throw_usage(std::string message);
[[noreturn]] void throw_internal(std::string message);

// Runs fn; an Error escaping it gets `what` prepended to its context.
template <class Fn>
auto with_context(std::string what, Fn&& fn) -> decltype(fn()) {
    try {
        return fn();
    } catch (Error& e) {
        e.add_context(std::move(what));
        throw;
    }
}

}  // namespace aff
