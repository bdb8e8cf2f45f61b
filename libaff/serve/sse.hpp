// Server-sent events as OpenAI streams them: each event is one `data: <json>` line
// followed by a blank line, and the stream ends with `data: [DONE]`. JSON is dumped
// on one line (newlines inside strings are escaped), so an event never spans lines.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace aff::serve {

std::string sse_event(const nlohmann::json& data);
std::string sse_done();

// Splits an SSE body into the payloads of its `data:` fields (for tests and clients
// of our own); throws aff::Error (format) on a line that is not a field or blank.
std::vector<std::string> sse_payloads(std::string_view body);

}  // namespace aff::serve
