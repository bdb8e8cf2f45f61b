// libFuzzer target: parsing generated DeepSeek-V4 text (untrusted model output). Property:
// never crashes or throws, and streaming the input in two pieces gives the same result as
// parsing it whole.
#include "libaff/tokenizer/chat.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    for (auto mode : {aff::chat::ThinkingMode::chat, aff::chat::ThinkingMode::thinking}) {
        aff::chat::ParsedCompletion whole = aff::chat::parse_completion(text, mode);
        aff::chat::StreamingParser stream(mode);
        std::size_t cut = size ? data[0] % (size + 1) : 0;
        stream.feed(text.substr(0, cut));
        stream.feed(text.substr(cut));
        stream.finish();
        const auto& r = stream.result();
        if (r.reasoning != whole.reasoning || r.content != whole.content ||
            r.tool_calls.size() != whole.tool_calls.size() || r.finished != whole.finished)
            std::abort();
    }
    return 0;
}
