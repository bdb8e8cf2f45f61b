// The HBM read ceiling every GPU benchmark divides its figure by, measured in the same run with the
// streaming read kernel (kernels/stream_read.hpp). Host code: it owns buffers, a stream and events
// through the device runtime, which kernels/ must not include.
#pragma once

namespace aff::gpu {

// Bytes/s of one pass of the streaming read over a 4 GiB buffer on the current device (8
// blocks a multiprocessor; median of 9 after 3 warm-up passes).
double measure_read_ceiling(int multiprocessors);

}  // namespace aff::gpu
