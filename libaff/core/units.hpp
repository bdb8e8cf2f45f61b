// Sizes as people write them: parsing "48GiB" / "50G" / "1000000" for flags, and
// printing byte counts and rates for reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace aff {

// Accepts an integer with an optional suffix: K, M, G, T (powers of 1000), KiB, MiB,
// GiB, TiB (powers of 1024), an optional trailing "B". Throws aff::Error (usage) naming
// the text on anything else, on zero, or on overflow.
std::uint64_t parse_size(std::string_view text);

// "1.50 GiB", "512 B".
std::string format_bytes(std::uint64_t bytes);
// "3.21 GB/s" (powers of 1000, as bandwidth is quoted).
std::string format_rate(double bytes_per_second);
// "1:02:03" or "2:03".
std::string format_duration(double seconds);

}  // namespace aff
