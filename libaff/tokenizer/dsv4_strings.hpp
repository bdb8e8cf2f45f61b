// The fixed strings of DeepSeek-V4's chat format. They are facts about the model's
// training format, reproduced from DeepSeek's reference encoder encoding_dsv4.py
// (DeepSeek-V4 release, encoding/encoding_dsv4.py; the same strings appear in SGLang's
// adapted copy): the prompt must contain them byte for byte or the model sees text it
// was not trained on. tests/data/chat/ holds the reference encoder's own output.
#pragma once

#include <string_view>

namespace aff::chat::dsv4 {

inline constexpr std::string_view bos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view eos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view user = "<｜User｜>";
inline constexpr std::string_view assistant = "<｜Assistant｜>";
inline constexpr std::string_view latest_reminder = "<｜latest_reminder｜>";
inline constexpr std::string_view think_start = "<think>";
inline constexpr std::string_view think_end = "</think>";
inline constexpr std::string_view dsml = "｜DSML｜";
inline constexpr std::string_view dsml_ascii = "|DSML|";  // seen from some servers; parsed, never written
inline constexpr std::string_view tool_result_open = "<tool_result>";
inline constexpr std::string_view tool_result_close = "</tool_result>";

// Inserted right after BOS in thinking mode with reasoning effort "max".
inline constexpr std::string_view reasoning_effort_max =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

// The tools section: tools_head + one JSON object per tool joined by "\n" + tools_tail.
inline constexpr std::string_view tools_head =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
inline constexpr std::string_view tools_tail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// Followed by the response-format JSON.
inline constexpr std::string_view response_format_head =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

}  // namespace aff::chat::dsv4
