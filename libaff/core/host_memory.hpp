// How much memory the host can still give without swapping: the kernel's MemAvailable estimate
// (/proc/meminfo), which the expert tiers size the pinned host pool from (placement/tier_plan.hpp).
// A parser of the file's text is split out so it is tested on fixed input.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace aff {

// The MemAvailable line of /proc/meminfo's text in bytes; nullopt when there is none or it
// does not read as "MemAvailable: <number> kB".
std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo);

// MemAvailable of this host in bytes; 0 when /proc/meminfo cannot be read or has no such line
// (then the pool gets nothing unless --host-pool-mib sizes it).
std::uint64_t host_mem_available();

}  // namespace aff
