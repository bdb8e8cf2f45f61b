// The prompt checks of prompt_limits.hpp.
#include "libaff/runtime/prompt_limits.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/stat.h>

namespace aff {

void check_prompt_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw_errno("cannot read the prompt file", path, errno);
    if (S_ISDIR(st.st_mode)) throw_usage(path + ": the prompt file is a directory");
}

std::string read_prompt_file(const std::string& path, std::uint64_t max_bytes) {
    check_prompt_file(path);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw_errno("cannot read the prompt file", path, errno);
    if (S_ISREG(st.st_mode) && std::uint64_t(st.st_size) > max_bytes)
        throw_usage(path + ": the prompt file holds " + std::to_string(st.st_size) + " bytes; the context can hold at most " +
                    std::to_string(max_bytes) + " bytes of text");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_io("cannot read the prompt file", path);
    // A FIFO or device has no size to check: read at most one byte past the limit.
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, std::size_t(in.gcount()));
        if (text.size() > max_bytes)
            throw_usage(path + ": the prompt holds more than " + std::to_string(max_bytes) +
                        " bytes, more text than the context can hold");
    }
    if (in.bad()) throw_io("cannot read the prompt file", path);
    return text;
}

std::uint64_t max_prompt_bytes(const tokenizer::Tokenizer& tok, std::size_t context) {
    std::size_t longest = 1;
    for (std::size_t id = 0; id < tok.id_limit(); ++id)
        if (tok.contains(tokenizer::TokenId(id))) longest = std::max(longest, tok.token_bytes(tokenizer::TokenId(id)).size());
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / longest;
    return std::uint64_t(context) > limit ? std::numeric_limits<std::uint64_t>::max() : std::uint64_t(context) * longest;
}

void check_prompt_bytes(std::uint64_t text_bytes, std::uint64_t max_bytes, std::size_t context) {
    if (text_bytes > max_bytes)
        throw_usage("the prompt of " + std::to_string(text_bytes) + " bytes cannot fit the context of " +
                    std::to_string(context) + " tokens (at most " + std::to_string(max_bytes) + " bytes of text)");
}

}  // namespace aff
