// measure_read_ceiling (read_ceiling.hpp): timed passes of the streaming read kernel.
#include "libaff/gpu/read_ceiling.hpp"

#include "libaff/gpu/device.hpp"
#include "kernels/stream_read.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace aff::gpu {

double measure_read_ceiling(int multiprocessors) {
    const size_t bytes = size_t{4} << 30;
    Buffer buf(bytes), sink(sizeof(uint32_t));
    Stream s;
    s.fill(buf.data(), 0x5a, bytes);
    const unsigned blocks = static_cast<unsigned>(multiprocessors) * 8;
    for (int i = 0; i < 3; ++i) stream_read(buf.data(), bytes / 16, sink.as<uint32_t>(), blocks, s.handle());
    std::vector<float> ms;
    for (int r = 0; r < 9; ++r) {
        Event a, b;
        a.record(s);
        stream_read(buf.data(), bytes / 16, sink.as<uint32_t>(), blocks, s.handle());
        b.record(s);
        b.synchronize();
        ms.push_back(b.ms_since(a));
    }
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3);
}

}  // namespace aff::gpu
