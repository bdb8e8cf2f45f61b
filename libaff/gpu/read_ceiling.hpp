// The HBM read ceiling every GPU benchmark divides its figure by, measured in the same run with the
// streaming read kernel (kernels/stream_read.hpp), and the same read over mapped host memory
// (the PCIe ceiling of the expert tiers' host pool). Host code: it owns buffers, a stream and events
// through the device runtime, which kernels/ must not include.
#pragma once

#include <cstddef>

namespace aff::gpu {

// Bytes/s of one pass of the streaming read over a 4 GiB buffer on the current device (8
// blocks a multiprocessor; median of 9 after 3 warm-up passes).
double measure_read_ceiling(int multiprocessors);

// Bytes/s of the same streaming read over `bytes` of pinned host memory mapped into the GPU
// (PinnedBuffer::device_data): what a kernel reading an expert in the host pool gets over the
// bus (the expert tiers' pool; median of 5 after 1 warm-up pass).
double measure_mapped_read_ceiling(int multiprocessors, std::size_t bytes = std::size_t{1} << 30);

}  // namespace aff::gpu
