// The streaming read that measures a GPU's HBM read ceiling: every benchmark divides its
// figure by the ceiling measured in the same run (libaff/gpu/read_ceiling.hpp) (tests/bench/gpu_bench.hpp for the kernel
// benchmarks, tests/bench/decode_bench.cpp for the whole decode step). Reads each 16-byte
// word once with streaming loads and keeps nothing. Host-callable declaration only; device
// code in stream_read.hip.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aff::gpu {

// Reads n16 16-byte words at p (16-byte aligned device memory) with `blocks` blocks of 256
// threads; sink (one device uint32) is written only in a case that never happens, so the
// loads stay.
void stream_read(const void* p, size_t n16, uint32_t* sink, unsigned blocks, void* stream);

}  // namespace aff::gpu
