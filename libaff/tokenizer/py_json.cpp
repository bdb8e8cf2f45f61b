// Python-compatible JSON writer (see py_json.hpp). Float digits come from std::to_chars'
// shortest round-trip form, the same digits Python's repr picks (both are shortest-
// round-trip); only the layout (fixed or exponent, ".0") follows Python's rules.
#include "libaff/tokenizer/py_json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace aff::tokenizer {

std::string py_float_repr(double x) {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string s(buf, res.ptr);
    std::string sign;
    if (s[0] == '-') {
        sign = "-";
        s.erase(0, 1);
    }
    auto e = s.find('e');
    std::string digits = s.substr(0, e);
    int exp10 = std::atoi(s.c_str() + e + 1);
    if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
    int decpt = exp10 + 1;  // value = 0.DIGITS x 10^decpt
    std::string out;
    if (decpt > 16 || decpt < -3) {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
        out += eb;
    } else if (decpt <= 0) {
        out = "0." + std::string(std::size_t(-decpt), '0') + digits;
    } else if (std::size_t(decpt) >= digits.size()) {
        out = digits + std::string(std::size_t(decpt) - digits.size(), '0') + ".0";
    } else {
        out = digits.substr(0, std::size_t(decpt)) + "." + digits.substr(std::size_t(decpt));
    }
    return sign + out;
}

std::string py_json_quote(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (char ch : text) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    out += b;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
    return out;
}

static void dump(const nlohmann::ordered_json& v, std::string& out) {
    using T = nlohmann::ordered_json::value_t;
    switch (v.type()) {
        case T::null: out += "null"; break;
        case T::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case T::number_integer: out += std::to_string(v.get<std::int64_t>()); break;
        case T::number_unsigned: out += std::to_string(v.get<std::uint64_t>()); break;
        case T::number_float: out += py_float_repr(v.get<double>()); break;
        case T::string: out += py_json_quote(v.get_ref<const std::string&>()); break;
        case T::array: {
            out += '[';
            bool first = true;
            for (const auto& e : v) {
                if (!first) out += ", ";
                first = false;
                dump(e, out);
            }
            out += ']';
            break;
        }
        case T::object: {
            out += '{';
            bool first = true;
            for (const auto& [k, e] : v.items()) {
                if (!first) out += ", ";
                first = false;
                out += py_json_quote(k);
                out += ": ";
                dump(e, out);
            }
            out += '}';
            break;
        }
        default: out += "null"; break;  // binary and discarded values never come from JSON text
    }
}

std::string py_json_dumps(const nlohmann::ordered_json& value) {
    std::string out;
    dump(value, out);
    return out;
}

}  // namespace aff::tokenizer
