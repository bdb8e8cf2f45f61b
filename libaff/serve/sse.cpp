// SSE framing (see sse.hpp).
#include "libaff/serve/sse.hpp"

#include "libaff/core/error.hpp"

namespace aff::serve {

std::string sse_event(const nlohmann::json& data) {
    // error_handler replace: a string that is not valid UTF-8 (a model may emit a
    // broken character at a length cut) must not take the stream down.
    return "data: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::vector<std::string> sse_payloads(std::string_view body) {
    std::vector<std::string> out;
    std::string data;
    bool have = false;
    while (!body.empty()) {
        const std::size_t nl = body.find('\n');
        if (nl == std::string_view::npos) throw_format("SSE stream ends inside a line");
        std::string_view line = body.substr(0, nl);
        body.remove_prefix(nl + 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) {
            if (have) out.push_back(std::move(data));
            data.clear();
            have = false;
            continue;
        }
        if (line.front() == ':') continue;  // comment
        if (line.substr(0, 5) != "data:") throw_format("SSE line is not a data field: " + std::string(line.substr(0, 40)));
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (have) data += '\n';
        data.append(line);
        have = true;
    }
    if (have) throw_format("SSE stream ends without a blank line after the last event");
    return out;
}

}  // namespace aff::serve
