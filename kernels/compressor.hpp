// The CSA/HCA compressor step on the GPU (model doc §3.5, §4.3 step 2), after the two
// projections: the chunk's tokens join the pending window, and each window of `ratio` tokens
// that completes emits one entry: per channel a softmax over the window's gate logits (CSA,
// overlap: the previous window's first halves Ca and this window's second halves Cb, 2·ratio
// slots) weighting the kv values, then RMS norm with `norm`, then the compress RoPE on the
// trailing rope_dim channels at position entry_index · ratio. Used for the main compressor
// (dim = head_dim) and the indexer's (dim = index_head_dim). CPU twin: aff::compress_tokens
// (libaff/model/attention_ops.hpp), the CPU forward's own code.
//
// Layouts (float32, row-major, device memory; width = overlap ? 2·dim : dim):
//   kv, gate      [n, width]      raw projections wkv·a and wgate·a of the chunk's tokens
//   ape           [ratio, width]  added to the gate of the token at slot position mod ratio
//   norm          [dim]
//   inv_freq      [rope_dim / 2]  compress RoPE inverse frequencies (aff::rope_inv_freq)
//   pending_kv    [ratio, width]  state: slots 0 .. start mod ratio − 1 hold the current window
//   pending_gate  [ratio, width]  state: the same tokens' gate logits, ape included
//   prev_kv       [ratio, dim]    state, CSA only: Ca (first halves) of the last complete window
//   prev_gate     [ratio, dim]    state, CSA only: its gate logits
//   entries       [capacity, dim] entry e in row e; this call writes rows start/ratio ..
//                                 (start+n)/ratio − 1 (capacity must cover them)
// The state is implied by `start` (positions 0 .. start−1 already went through this step,
// here or on the CPU): start mod ratio pending tokens, start / ratio entries, a previous window
// when start ≥ ratio. Unlike the CPU state, no counters live on the device.
#pragma once

#include <cstdint>

namespace aff::gpu {

struct CompressorArgs {
    const float* kv = nullptr;
    const float* gate = nullptr;
    const float* ape = nullptr;
    const float* norm = nullptr;
    const float* inv_freq = nullptr;
    float* pending_kv = nullptr;
    float* pending_gate = nullptr;
    float* prev_kv = nullptr;     // CSA only (null for HCA)
    float* prev_gate = nullptr;   // CSA only
    float* entries = nullptr;
    int n = 0;
    int ratio = 0;
    int dim = 0;                  // at most 512
    int rope_dim = 0;             // even, at most dim
    bool overlap = false;         // CSA
    float eps = 1e-6f;
    int64_t start = 0;
    // Graph replay: as AttentionArgs::start_at (kernels/attention.hpp).
    const int32_t* start_at = nullptr;
};

// Two launches on `stream`: emit the completed windows' entries, then advance the pending and
// previous-window state. Throws unsupported for sizes out of range.
void compressor(const CompressorArgs& a, void* stream);

// Up to 8 independent steps (each its own state, sizes, kind and start) in the same two
// launches: every sequence of a decode batch, and a CSA layer's main and indexer compressors
// at once. Each step's results are exactly those of compressor() on it alone. The steps must
// not share state.
inline constexpr int kCompressorMaxBatch = 8;
void compressor_batch(const CompressorArgs* steps, int count, void* stream);

// Entries completed by a chunk: rows [start / ratio, (start + n) / ratio).
inline int64_t compressor_first_entry(int64_t start, int ratio) { return start / ratio; }
inline int64_t compressor_end_entry(int64_t start, int n, int ratio) { return (start + n) / ratio; }

// fp32 softmax and norm; the RoPE angle in fp32 and its sine/cosine in fp64 as on the CPU.
// Measured up to 1e-14 (max relative error 2.6e-7) on the H200, 2026-11-29.
inline constexpr double compressor_max_nmse = 1e-10;

}  // namespace aff::gpu
