// libFuzzer target for the HTTP request parser and the OpenAI body validators, the
// two parsers that see bytes from the network. Properties: no crash, no hang, limits
// hold (body never over its limit), and the result does not depend on how the bytes
// were split across reads (whole input versus the same bytes one at a time).
#include "libaff/serve/http_request.hpp"
#include "libaff/serve/openai_request.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using aff::serve::HttpRequestParser;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    aff::serve::HttpLimits limits;
    limits.max_header_bytes = 1024;
    limits.max_body_bytes = 4096;

    HttpRequestParser whole(limits);
    const std::size_t used = whole.feed(bytes);
    if (used > size) std::abort();
    if (whole.request().body.size() > limits.max_body_bytes) std::abort();

    HttpRequestParser split(limits);
    std::size_t used_split = 0;
    for (std::size_t i = 0; i < size && split.state() == HttpRequestParser::State::need_more; ++i)
        used_split += split.feed(bytes.substr(i, 1));
    if (split.state() != whole.state()) std::abort();
    // (After an error the count of bytes consumed may differ: the whole-input parser
    // takes a line at a time before checking the header limit. It is not used then.)
    if (whole.state() != HttpRequestParser::State::error && used_split != used) std::abort();
    if (whole.state() == HttpRequestParser::State::error && split.error_status() != whole.error_status()) std::abort();
    if (whole.state() == HttpRequestParser::State::complete) {
        const auto& a = whole.request();
        const auto& b = split.request();
        if (a.method != b.method || a.target != b.target || a.body != b.body || a.headers != b.headers ||
            a.keep_alive != b.keep_alive)
            std::abort();
        // The body goes on to the JSON validators, which must answer, never throw.
        (void)aff::serve::parse_chat_request(a.body, false);
        (void)aff::serve::parse_completion_request(a.body);
    }
    return 0;
}
