// Device helpers shared by the two attention kernel files (attention.hip: a block per head pair
// and token, for prefill; attention_decode.hip: all heads of a token against each key tile, for
// decode): which keys a query sees and where each key row lives. Internal to kernels/.
#pragma once

#include "kernels/attention.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu::attn {

__host__ __device__ inline int visible(int count, long long p, int ratio) {
    const long long v = (p + 1) / ratio;
    return v < count ? static_cast<int>(v) : count;
}

// Entries emitted so far: with start_at, those the start read on the device implies (the
// compressor's rule, kernels/compressor.hpp), else the caller's count.
__device__ inline int entry_count(const AttentionArgs& a, long long start) {
    return a.start_at && a.ratio > 0 ? static_cast<int>((start + a.n) / a.ratio) : a.entry_count;
}

// The start of the chunk: read on the device when the launch was captured for replay.
__device__ inline long long chunk_start(const AttentionArgs& a) { return a.start_at ? *a.start_at : a.start; }

// Keys of query t (position p = start + t): the window rows (wcount), then its entries.
struct QueryKeys {
    long long first;  // position of the first window row
    int wcount;
    int keys;
};

__device__ inline QueryKeys query_keys(const AttentionArgs& a, long long start, int t) {
    const long long p = start + t;
    QueryKeys k;
    k.first = p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    k.wcount = static_cast<int>(p - k.first + 1);
    int ecount = 0;
    if (a.entries) ecount = a.selected ? a.selected_count[t] : visible(entry_count(a, start), p, a.ratio);
    k.keys = k.wcount + ecount;
    return k;
}

// Block mode (AttentionArgs::ring_first ≥ 0): every query sees the ring from
// max(0, ring_first, start − W) and the whole chunk; key_row then serves as it is (the rows at
// positions ≥ start are the chunk's kv). Only the prefill kernel (attention.hip) takes it.
__device__ inline QueryKeys block_keys(const AttentionArgs& a, long long start) {
    long long first = start - a.window;
    if (first < a.ring_first) first = a.ring_first;
    if (first < 0) first = 0;
    QueryKeys k;
    k.first = first;
    k.wcount = static_cast<int>(start - first) + a.n;
    k.keys = k.wcount;
    return k;
}

// Key j of query t: window rows first (from kv for positions ≥ start, from the ring before),
// then its entries. Null past the end.
__device__ inline const float* key_row(const AttentionArgs& a, long long start, int t, long long first, int wcount,
                                       int keys, int j, int dim) {
    if (j < wcount) {
        const long long pos = first + j;
        return pos >= start ? a.kv + static_cast<size_t>(pos - start) * dim
                              : a.ring + static_cast<size_t>(pos % a.window) * dim;
    }
    if (j >= keys) return nullptr;
    const int e = j - wcount;
    const int idx = a.selected ? a.selected[static_cast<size_t>(t) * a.selected_stride + e] : e;
    return a.entries + static_cast<size_t>(idx) * dim;
}

// The decode path (attention_decode.hip): the keys a tile, the key ranges a query of `a` is cut into, the
// launch of several sequences' queries at once (rings: null, or where each stores its token),
// and the scratch that path needs.
int decode_tile(const AttentionArgs& a);
int decode_splits(const AttentionArgs& a);
void decode_launch(const AttentionArgs* seqs, int count, float* const* rings, void* stream);
size_t decode_scratch_bytes(int n, int heads, int head_dim);

}  // namespace aff::gpu::attn
