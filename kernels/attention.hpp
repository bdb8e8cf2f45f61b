// Sliding-window + compressed attention with sinks on the GPU (model doc §3.4-§3.8), for
// decode (1-4 tokens) and chunked prefill (any n): the queries of n consecutive positions
// against one shared latent head (MQA: key = value). CPU twin: aff::attend and
// aff::ring_store (libaff/model/attention_ops.hpp), the CPU forward's own code.
//
// Layouts (all float32, row-major, device memory):
//   q        [n, heads, head_dim]  normalised and RoPE'd queries of positions start .. start+n-1
//   kv       [n, head_dim]         this chunk's latents (normalised, RoPE'd): keys and values
//   ring     [window, head_dim]    the last `window` latents before `start`; slot = position mod window
//   entries  [entry_count, head_dim] the layer's compressed entries (this chunk's included), or null
//   selected [n, selected_stride]  CSA: the indexer's top-k and selected_count [n], laid out as
//                                  kernels/indexer.hpp says; null for HCA: every entry visible to
//                                  the query, min(entry_count, (p+1)/ratio)
//   sink     [heads]               the per-head sink logit
//   out      [n, heads, head_dim]  Σ_j softmax_j · k_j, BEFORE the inverse RoPE (the caller
//                                  de-rotates with kernels/rope.hpp, inverse = true)
// Keys of the query at position p: window positions max(0, p−W+1) .. p (from kv for positions
// ≥ start, from the ring before), then its entries. Causal inside the chunk by construction.
// Block mode (ring_first ≥ 0; DSpark's draft block, model doc §5.2, CPU twin aff::attend_block):
// every query of the chunk sees the ring's positions max(0, ring_first, start − W) .. start − 1
// and all n keys of the chunk, no causal mask inside it; no entries, no scratch (the prefill
// kernel of attention.hip), and the caller stores nothing in the ring (its keys are guesses).
#pragma once

#include <cstddef>
#include <cstdint>

namespace aff::gpu {

struct AttentionArgs {
    const float* q = nullptr;
    const float* kv = nullptr;
    const float* ring = nullptr;
    const float* entries = nullptr;
    const int32_t* selected = nullptr;
    const int32_t* selected_count = nullptr;
    const float* sink = nullptr;
    float* out = nullptr;
    int n = 0;               // queries (tokens) in the chunk, at most 65535
    int heads = 0;           // H
    int head_dim = 0;        // Dh: 32, 64, 128, 256 or 512
    int window = 0;          // W
    int64_t start = 0;       // position of the chunk's first token
    int entry_count = 0;     // entries emitted so far
    int ratio = 0;           // compress ratio (visibility rule); ignored without entries
    int selected_stride = 0;
    // Optional, for decode: device scratch of attention_scratch_bytes(n, heads, head_dim). With
    // it, the decode kernel (kernels/attention_decode.hip): a block takes 16 heads of a token
    // against one range of its keys, reading each key row once for all 16, and a second kernel
    // merges the ranges (several when the launch has few blocks); without it, one block per
    // (head pair, token), which suits long prefill chunks.
    float* scratch = nullptr;
    // Graph replay (libaff/gpu/forward_decode.cpp): when set, the chunk's start is read here (device
    // memory) when the kernel runs and `start` is ignored; the entries visible to a query then
    // follow from it ((start + n) / ratio, the compressor's count) and entry_count only bounds
    // them to shape the launch (the key ranges assume a full window and entry_count entries),
    // so one captured launch serves every position.
    const int32_t* start_at = nullptr;
    // Decode kernel's keys a tile: 0 lets it choose (8 when the kind bounds a query's keys to a
    // few tiles, else 32; attention_tile says which); 8 or 32 (NVIDIA) force one, for tests and
    // benchmarks. attention_batch uses the first sequence's.
    int decode_tile = 0;
    // Block mode (see above): the first ring position the block may see; -1: off.
    int64_t ring_first = -1;
};

// Throws unsupported for a head_dim other than 32/64/128/256/512 or n out of range, and for
// block mode with entries, scratch or start_at.
void attention(const AttentionArgs& a, void* stream);

// Decode of several sequences in one launch (the forward's batch 1-4): seqs[i] as attention()
// takes it, each with its own state, start or start_at, tokens and scratch (required); the same
// heads, head_dim, window and kind (sliding, CSA with a selection, HCA) for all. Each sequence
// gets exactly what attention(seqs[i]) gives it (the same ranges, summed in the same order).
// rings: null, or each sequence's ring (seqs[i].ring, writable): the launch also stores the
// sequence's token there as ring_store does. Only for one token a sequence (n = 1): that
// query never reads the slot its token replaces (position start − window), the only case where
// the store cannot race the reads.
inline constexpr int kAttentionMaxBatch = 4;
void attention_batch(const AttentionArgs* seqs, int count, float* const* rings, void* stream);

// Bytes of scratch a launch of n tokens may use (n = 4, 64 × 512: 33.7 MB; decode only needs it).
size_t attention_scratch_bytes(int n, int heads, int head_dim);

// The key ranges per query a launch uses (1 without scratch; with start_at an upper bound, the
// kernel leaves the ranges past a query's last key empty); for tests and benchmarks.
int attention_splits(const AttentionArgs& a);
// The decode kernel's keys a tile for `a` (with scratch); for tests and benchmarks.
int attention_tile(const AttentionArgs& a);

// ring[(start + t) mod window] ← kv[t] for the chunk's last min(n, window) tokens. Launch after
// attention() on the same stream (the queries read the ring as it was before the chunk).
// With start_at (device memory) the start is read there when the kernel runs, as in AttentionArgs.
void ring_store(float* ring, const float* kv, int n, int head_dim, int window, int64_t start, void* stream,
                const int32_t* start_at = nullptr);

// fp32 dot products and softmax, summed in another order than the CPU (online softmax over
// warps or key tiles and key ranges): measured up to 1.2e-12 (max relative error 2.3e-6) on
// the H200, 2026-11-29 (tests/gpu/attention_test.cpp).
inline constexpr double attention_max_nmse = 1e-10;

}  // namespace aff::gpu
