// The figures as text: numbers with their units, the sparkline of a rate's last minute,
// and the plain line (--ui plain, or --ui auto when stderr is not a terminal). Shared by
// the dashboard and the plain reporter so both say the same thing the same way.
#pragma once

#include "libaff/ui/stats.hpp"

#include <string>
#include <vector>

namespace aff::ui {

// "12.3"; "-" for a negative value (a figure not reported).
std::string fixed(double value, int decimals);
// "1.5 GB/s"; "-" for a negative value.
std::string bytes_per_second(double value);
// "100.2/139.8 GiB"; "-" when either is not reported.
std::string memory_pair(double used_bytes, double total_bytes);

// The last `width` values as bars scaled to their maximum (the newest on the right),
// padded with blanks on the left; UTF-8 block elements, or ASCII when !unicode.
std::string sparkline(const std::vector<double>& values, int width, bool unicode);

// One line of key=value fields in a fixed order, prefixed "<tool>: stats ". Figures not
// published yet say so ("drafts=none-yet", "tiers=none-yet"); drafts turned off say
// "drafts=off", experts all in one place "tiers=all-resident-CPU" (or -GPU); GPU fields only
// with a GPU library.
std::string plain_line(const Snapshot& snapshot);

}  // namespace aff::ui
