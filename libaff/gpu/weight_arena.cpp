// The weight arena (weight_arena.hpp): places and the upload.
#include "libaff/gpu/weight_arena.hpp"

#include <algorithm>
#include <cstring>

namespace aff::gpu::fwd {

std::size_t WeightArena::reserve(std::size_t bytes, std::size_t& counter) {
    const std::size_t at = arena_bytes;
    arena_bytes += align_up(bytes);
    counter += align_up(bytes);
    return at;
}

std::size_t WeightArena::put_floats(const std::vector<float>& v, std::size_t& counter) {
    const std::size_t at = reserve(v.size() * 4, counter);
    uploads.push_back({at, v.size() * 4, [&v](std::uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * 4); }});
    return at;
}

void WeightArena::upload(const Stream& stream) {
    arena = Buffer(std::max<std::size_t>(arena_bytes, kAlign));
    std::vector<std::uint8_t> staging;
    for (const Upload& up : uploads) {
        staging.resize(up.bytes);
        up.fill(staging.data());
        stream.copy(arena.as<std::uint8_t>() + up.offset, staging.data(), up.bytes);
        stream.synchronize();  // staging is reused
    }
    uploads.clear();
}

}  // namespace aff::gpu::fwd
