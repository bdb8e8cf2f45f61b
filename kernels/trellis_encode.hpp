// The Viterbi search of the trellis encoder on the GPU (formats/quant-codebook.md §8): for
// each 256-weight block, the window sequence of least weighted squared error, bit for bit
// the one libaff/quant/trellis.cpp's search_block finds (same binary32 operations in the
// same order, no FMA, ties to the smallest window). Scales, error checks and bit packing
// stay on the host (trellis.hpp's encode_begin/targets/searched/finish), so the bytes are
// the CPU encoder's. Host-callable declaration only; device code in trellis_encode.hip,
// the CPU twin is search_block itself, the host side libaff/gpu/trellis_search.cpp.
#pragma once

#include <cstdint>

namespace aff::gpu {

// The codebook as the kernel reads it: kTrellisTableFloats floats, made once per codebook
// by trellis_tables(): c₀[4096], c₁[4096], then the traceback's reordered copies (entry
// (h << (12−k)) | u at [u·2^k + h]) of c₀ and c₁ for k = 6 and for k = 5.
inline constexpr int kTrellisTableFloats = 6 * 4096;
void trellis_tables(const float* c0, const float* c1, float* out);

// For block i < blocks: targets y[256·i …] (the weights divided by the block's scale),
// position weights q[256·q_index[i] …]; writes its 128 windows to windows[128·i …].
// All pointers are device memory; tables as trellis_tables() makes them. blocks_per_sm: 2
// (128 registers a thread, no spills) or 3 (80 registers, some spilled); the benchmark
// (tests/bench/quantize_speed_bench --gpu-tuning) measures both.
void trellis_search(const float* tables, const float* y, const float* q, const uint32_t* q_index,
                    uint16_t* windows, int blocks, void* stream, int blocks_per_sm = 2);

}  // namespace aff::gpu
