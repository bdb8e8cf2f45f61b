// One part of GpuModel::Impl (forward_impl.hpp): the weight arena. Every weight of a part has
// its place (an offset) in one device allocation, planned before anything is allocated so the
// plan can be checked against free memory; the bytes are produced only when the arena exists
// (Upload), through one staging buffer. Private to the GPU forward.
#pragma once

#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace aff::gpu::fwd {

inline constexpr std::size_t kAlign = 256;
inline std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Whether every value is exactly a BF16 number (then BF16 storage is lossless), and the
// BF16 bytes of such values (their high halves).
inline bool exactly_bf16(const float* v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u;
        std::memcpy(&u, &v[i], 4);
        if (u & 0xffffu) return false;
    }
    return true;
}
inline void store_bf16(const float* v, std::size_t n, std::uint8_t* dst) {
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u;
        std::memcpy(&u, &v[i], 4);
        const std::uint16_t h = static_cast<std::uint16_t>(u >> 16);
        std::memcpy(dst + 2 * i, &h, 2);
    }
}

// A host-side copy waiting for the arena: `fill` produces the bytes when the arena is filled.
struct Upload {
    std::size_t offset = 0, bytes = 0;
    std::function<void(std::uint8_t*)> fill;
};

struct WeightArena {
    GpuMemoryPlan plan;           // this part's bytes by class
    std::vector<Upload> uploads;  // waiting for the arena
    std::size_t arena_bytes = 0;
    Buffer arena;

    // An aligned place of `bytes` in the arena, counted in `counter` (a class of plan).
    std::size_t reserve(std::size_t bytes, std::size_t& counter);
    // v's floats at a new place (v must live until upload).
    std::size_t put_floats(const std::vector<float>& v, std::size_t& counter);
    std::size_t put_vec(const std::vector<float>& v) { return put_floats(v, plan.dense_bytes); }
    // Allocates the arena and fills it upload by upload; the list is emptied.
    void upload(const Stream& stream);

    template <class T>
    T* at(std::size_t offset) const {
        return reinterpret_cast<T*>(arena.as<std::uint8_t>() + offset);
    }
};

}  // namespace aff::gpu::fwd
