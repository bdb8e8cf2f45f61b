// The byte layout of formats/route-trace.md shared by the reader (route_trace.cpp) and the
// writer (route_trace_writer.cpp): magic numbers, structure sizes, limits, and the
// little-endian field access both use, so the two cannot disagree on an offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace aff::trace::layout {

constexpr std::uint8_t kMagic[8] = {0x89, 'A', 'F', 'T', 0x0D, 0x0A, 0x1A, 0x0A};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint8_t kChunkTag[4] = {'R', 'T', 'C', 'K'};
constexpr std::uint8_t kEndTag[4] = {'R', 'T', 'N', 'D'};
constexpr std::size_t kChunkHeader = 48, kEndRecord = 48, kTokenEntry = 16, kStepHeader = 8;
constexpr std::uint64_t kMaxChunkSteps = std::uint64_t(1) << 24;
constexpr std::uint64_t kMaxStored = std::uint64_t(1) << 27, kMaxRaw = std::uint64_t(1) << 26;
constexpr std::uint64_t kChunkTarget = std::uint64_t(1) << 20;  // writers start a new chunk past 1 MiB
enum Codec : std::uint32_t { codec_none = 0, codec_zstd = 1 };

constexpr std::size_t header_size(std::uint32_t layers) { return 64 + 8 * ((std::size_t(layers) + 7) / 8); }
constexpr std::size_t layer_block_size(std::size_t n, std::uint32_t k) { return 4 + 6 * n * k; }

inline void put(std::uint8_t* p, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint64_t get(const std::uint8_t* p, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(p[i]) << (8 * i);
    return v;
}
inline void put_f32(std::uint8_t* p, float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    put(p, u, 4);
}
inline float get_f32(const std::uint8_t* p) {
    const auto u = static_cast<std::uint32_t>(get(p, 4));
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace aff::trace::layout
