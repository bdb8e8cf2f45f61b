// Parsing and formatting of sizes, rates and durations.
#include "libaff/core/units.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/progress.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace aff {

NullProgress& null_progress() {
    static NullProgress instance;
    return instance;
}

std::uint64_t parse_size(std::string_view text) {
    const std::string quoted = "'" + std::string(text) + "'";
    std::size_t i = 0;
    std::uint64_t value = 0;
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
        throw_usage("invalid size " + quoted + ": expected a number such as 48GiB");
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) throw_usage("size " + quoted + " is too large");
        value = value * 10 + digit;
        ++i;
    }
    std::string suffix;
    for (; i < text.size(); ++i) suffix.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
    std::uint64_t mult = 1;
    if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();
    if (suffix.empty()) mult = 1;
    else if (suffix == "K") mult = 1000ull;
    else if (suffix == "M") mult = 1000ull * 1000;
    else if (suffix == "G") mult = 1000ull * 1000 * 1000;
    else if (suffix == "T") mult = 1000ull * 1000 * 1000 * 1000;
    else if (suffix == "KI") mult = 1ull << 10;
    else if (suffix == "MI") mult = 1ull << 20;
    else if (suffix == "GI") mult = 1ull << 30;
    else if (suffix == "TI") mult = 1ull << 40;
    else throw_usage("invalid size " + quoted + ": unknown unit (use K, M, G, T, KiB, MiB, GiB or TiB)");
    if (value == 0) throw_usage("invalid size " + quoted + ": must be greater than zero");
    if (value > std::numeric_limits<std::uint64_t>::max() / mult) throw_usage("size " + quoted + " is too large");
    return value * mult;
}

std::string format_bytes(std::uint64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

std::string format_rate(double bytes_per_second) {
    static const char* units[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    int u = 0;
    while (bytes_per_second >= 1000.0 && u < 4) {
        bytes_per_second /= 1000.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes_per_second, units[u]);
    return buf;
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    auto s = static_cast<unsigned long long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%llu:%02llu", s / 60, s % 60);
    return buf;
}

}  // namespace aff
