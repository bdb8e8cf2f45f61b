// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, because
// DeepSeek's reference chat encoder (encoding_dsv4.py) serialises tool schemas, tool-call
// arguments and response formats that way and the prompt must match it byte for byte:
// ", " and ": " separators, keys in their given order, non-ASCII characters raw, control
// characters as \u00XX (lower-case hex), floats in Python's repr form (1.0, 1e-05, 1e+16).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace aff::tokenizer {

std::string py_json_dumps(const nlohmann::ordered_json& value);
// A JSON string literal for `text` (the quotes included), as json.dumps(str) writes it.
std::string py_json_quote(std::string_view text);
// Python's repr() of a double.
std::string py_float_repr(double value);

}  // namespace aff::tokenizer
