// Parsing and writing of SHA256SUMS lines, and the streaming file hasher used by
// aff-verify -c (see sha256sums.hpp).
#include "libaff/container/sha256sums.hpp"

#include "libaff/container/pipelined_read.hpp"

#include "libaff/core/error.hpp"

#include <cerrno>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <memory>
#include <unistd.h>

namespace aff {
namespace {

constexpr std::size_t kReadBytes = 4u << 20;

[[noreturn]] void bad_line(const std::string& path, std::size_t n, const std::string& why) {
    throw_format("line " + std::to_string(n) + ": " + why, path);
}

}  // namespace

std::vector<ChecksumLine> parse_sha256sums(std::string_view text, const std::string& path) {
    std::vector<ChecksumLine> out;
    std::size_t n = 0;
    while (!text.empty()) {
        ++n;
        const std::size_t nl = text.find('\n');
        if (nl == std::string_view::npos) bad_line(path, n, "no newline at the end of the line");
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl + 1);
        const bool escaped = !line.empty() && line[0] == '\\';
        if (escaped) line.remove_prefix(1);
        ChecksumLine c;
        if (line.size() < 67 || !from_hex(line.substr(0, 64), c.digest) || line[64] != ' ' ||
            (line[65] != ' ' && line[65] != '*'))
            bad_line(path, n, "malformed (expected 64 hex digits, two spaces and a file name)");
        std::string_view name = line.substr(66);
        if (escaped) {
            for (std::size_t i = 0; i < name.size(); ++i) {
                if (name[i] != '\\') {
                    c.name.push_back(name[i]);
                    continue;
                }
                if (i + 1 == name.size()) bad_line(path, n, "name ends with a lone backslash");
                const char e = name[++i];
                if (e == 'n') c.name.push_back('\n');
                else if (e == '\\') c.name.push_back('\\');
                else bad_line(path, n, std::string("unknown escape \\") + e + " in the name");
            }
        } else {
            c.name.assign(name);
        }
        if (c.name.find('\0') != std::string::npos) bad_line(path, n, "name holds a NUL byte");
        out.push_back(std::move(c));
    }
    return out;
}

std::vector<ChecksumLine> read_sha256sums(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_errno("cannot open", path, errno);
    std::string text{std::istreambuf_iterator<char>(in), {}};
    if (in.bad()) throw_io("cannot read", path);
    return parse_sha256sums(text, path);
}

std::string format_sha256sums_line(const ChecksumLine& line) {
    const bool escape = line.name.find_first_of("\\\n") != std::string::npos;
    std::string name;
    for (char c : line.name) {
        if (escape && c == '\\') name += "\\\\";
        else if (escape && c == '\n') name += "\\n";
        else name.push_back(c);
    }
    return (escape ? "\\" : "") + to_hex(line.digest) + "  " + name + "\n";
}

Sha256Digest sha256_file(const std::string& path, Progress& progress) {
    const SequentialFile file(path);
    std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[kReadBytes]);
    Sha256 h;
    for (;;) {
        const ssize_t r = ::read(file.fd(), buf.get(), kReadBytes);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno("cannot read", path, errno);
        }
        if (r == 0) break;
        h.update(buf.get(), static_cast<std::size_t>(r));
        progress.advance(static_cast<std::uint64_t>(r));
    }
    return h.finish();
}

}  // namespace aff
