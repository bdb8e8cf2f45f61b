// measure_read_ceiling (read_ceiling.hpp): timed passes of the streaming read kernel.
#include "libaff/gpu/read_ceiling.hpp"

#include "libaff/gpu/device.hpp"
#include "kernels/stream_read.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace aff::gpu {

namespace {

// Median bytes/s of `passes` streaming reads of [data, data + bytes) after `warm` untimed ones.
double timed_reads(const void* data, size_t bytes, int multiprocessors, int warm, int passes) {
    Buffer sink(sizeof(uint32_t));
    Stream s;
    const unsigned blocks = static_cast<unsigned>(multiprocessors) * 8;
    for (int i = 0; i < warm; ++i) stream_read(data, bytes / 16, sink.as<uint32_t>(), blocks, s.handle());
    std::vector<float> ms;
    for (int r = 0; r < passes; ++r) {
        Event a, b;
        a.record(s);
        stream_read(data, bytes / 16, sink.as<uint32_t>(), blocks, s.handle());
        b.record(s);
        b.synchronize();
        ms.push_back(b.ms_since(a));
    }
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3);
}

}  // namespace

double measure_read_ceiling(int multiprocessors) {
    const size_t bytes = size_t{4} << 30;
    Buffer buf(bytes);
    {
        Stream s;
        s.fill(buf.data(), 0x5a, bytes);
        s.synchronize();
    }
    return timed_reads(buf.data(), bytes, multiprocessors, 3, 9);
}

double measure_mapped_read_ceiling(int multiprocessors, size_t bytes) {
    bytes = bytes / 16 * 16;
    PinnedBuffer buf(bytes);
    std::fill_n(static_cast<unsigned char*>(buf.data()), bytes, static_cast<unsigned char>(0x5a));
    return timed_reads(buf.device_data(), bytes, multiprocessors, 1, 5);
}

}  // namespace aff::gpu
