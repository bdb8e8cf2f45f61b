// Byte layout of the .aff container (formats/container.md §3, §4 and §7): field sizes, the magic,
// section IDs and little-endian load/store helpers. Shared by the reader and the writer
// so the two cannot drift; nothing outside libaff/container needs it.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace aff::container_layout {

constexpr std::array<std::uint8_t, 8> kMagic{0x89, 'A', 'F', 'F', 0x0D, 0x0A, 0x1A, 0x0A};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kHeaderSize = 64;
constexpr std::uint64_t kDataStart = 4096;       // header padded to one page
constexpr std::uint64_t kExtentAlignment = 4096;  // O_DIRECT and page granularity
constexpr std::uint64_t kTensorAlignment = 64;
constexpr std::uint64_t kSectionAlignment = 8;
constexpr std::uint32_t kSectionEntrySize = 32;
constexpr std::uint32_t kDirHeaderSize = 16;
constexpr std::uint32_t kExtentRecordSize = 32;
constexpr std::uint32_t kTensorRecordSize = 72;
constexpr std::uint32_t kNoExtent = 0xFFFFFFFFu;
constexpr std::uint32_t kMaxRank = 4;

constexpr std::uint32_t kSectionRequired = 1u;  // section flags bit 0
constexpr std::uint32_t kExtentDraft = 1u;      // extent flags bit 0

// Header field offsets.
constexpr std::size_t kOffVersion = 8, kOffHeaderSize = 12, kOffFileSize = 16, kOffTableOffset = 24,
                      kOffSectionCount = 32, kOffReserved1 = 36, kOffTableDigest = 40, kOffReserved2 = 48,
                      kOffHeaderDigest = 56;

inline std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }
inline std::uint32_t load_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline std::uint64_t load_u64(const std::uint8_t* p) {
    return static_cast<std::uint64_t>(load_u32(p)) | static_cast<std::uint64_t>(load_u32(p + 4)) << 32;
}
inline void store_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void store_u64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

inline std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace aff::container_layout
