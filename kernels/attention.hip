// Attention kernel (declarations, layouts and contract in attention.hpp). One block per
// (head pair, token, key range); its eight warps take the range's keys in turn, two keys per
// step, each warp keeping an online softmax per head (running max, denominator and weighted
// sum of the keys it saw); each key row a warp loads serves both heads. The warps' partials are
// merged in shared memory, with the sink logit when there is one range; with several (decode
// with scratch) each range writes its partial and attention_combine_kernel merges them. A lane
// holds head_dim / 32 channels (for head_dim ≥ 128 four of each 128-channel slice): key rows
// are read as coalesced loads, 16 bytes a lane where the row allows it.
#include "kernels/attention.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kTargetBlocks = 528;  // decode: split the keys until about 4 blocks per H200 SM
constexpr int kMaxSplits = 32;
constexpr int kMinSplitKeys = 64;
constexpr int kMaxDim = 512;
constexpr float kNegInf = -__builtin_huge_valf();

__host__ __device__ inline int visible(int count, long long p, int ratio) {
    const long long v = (p + 1) / ratio;
    return v < count ? static_cast<int>(v) : count;
}

// Entries emitted so far: with start_at, those the start read on the device implies (the
// compressor's rule, kernels/compressor.hpp), else the caller's count.
__device__ inline int entry_count(const AttentionArgs& a, long long start) {
    return a.start_at && a.ratio > 0 ? static_cast<int>((start + a.n) / a.ratio) : a.entry_count;
}

// The keys of query t: window rows first, then its entries. Null past the end.
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

// A lane's kV channels of a row of kV · 32: for kV ≥ 4, float4 slices c · 32 + lane (channels
// 4·(c·32 + lane) + i), so a warp reads 512 contiguous bytes per slice; for kV = 2 or 1 the
// lane's own pair or channel. lane_channel gives the channel of register v.
template <int kV>
__device__ inline int lane_channel(int lane, int v) {
    if constexpr (kV >= 4) return 4 * ((v / 4) * kWarp + lane) + v % 4;
    else return lane * kV + v;
}

template <int kV>
__device__ inline void load_lane(const float* row, int lane, float (&out)[kV]) {
    if constexpr (kV >= 4) {
#pragma unroll
        for (int c = 0; c < kV / 4; ++c) {
            const float4 f = reinterpret_cast<const float4*>(row)[c * kWarp + lane];
            out[4 * c] = f.x;
            out[4 * c + 1] = f.y;
            out[4 * c + 2] = f.z;
            out[4 * c + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int v = 0; v < kV; ++v) out[v] = row[lane * kV + v];
    }
}

// Block (head group, token · splits + split): kHB heads share every key row a warp loads;
// the query's keys are cut into `splits` contiguous ranges. kV = head_dim / 32 channels per
// lane. splits == 1: the block applies the sink and writes out; else it writes its partial
// (max, denominator, weighted sum) to scratch for attention_combine_kernel.
template <int kV, int kHB>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a, int splits, float* scratch) {
    constexpr int kDim = kV * kWarp;
    constexpr int kUnroll = kHB == 1 ? 4 : 2;  // keys per warp step: independent loads in flight
    __shared__ float sm_acc[kWarps][kDim];
    __shared__ float sm_m[kWarps], sm_l[kWarps];
    const int h0 = static_cast<int>(dev::block_x()) * kHB;
    const int t = static_cast<int>(dev::block_y()) / splits;
    const int split = static_cast<int>(dev::block_y()) % splits;
    const int warp = static_cast<int>(dev::thread_x()) / kWarp;
    const int lane = static_cast<int>(dev::lane_id());
    const long long start = a.start_at ? *a.start_at : a.start;
    const long long p = start + t;
    const long long first = p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    const int wcount = static_cast<int>(p - first + 1);
    int ecount = 0;
    if (a.entries) ecount = a.selected ? a.selected_count[t] : visible(entry_count(a, start), p, a.ratio);
    const int keys = wcount + ecount;
    const int per_split = (keys + splits - 1) / splits;
    const int begin = split * per_split;
    const int end = begin + per_split < keys ? begin + per_split : keys;

    float q[kHB][kV], acc[kHB][kV];
    float m[kHB], l[kHB];
#pragma unroll
    for (int hh = 0; hh < kHB; ++hh) {
        load_lane<kV>(a.q + (static_cast<size_t>(t) * a.heads + h0 + hh) * kDim, lane, q[hh]);
#pragma unroll
        for (int v = 0; v < kV; ++v) acc[hh][v] = 0.0f;
        m[hh] = kNegInf;
        l[hh] = 0.0f;
    }
    const float scale = 1.0f / sqrtf(static_cast<float>(kDim));

    for (int base = begin + warp * kUnroll; base < end; base += kWarps * kUnroll) {
        float k[kUnroll][kV];
        float s[kUnroll][kHB];
        bool real[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const float* row = base + u < end ? key_row(a, start, t, first, wcount, keys, base + u, kDim) : nullptr;
            real[u] = row != nullptr;  // the same for the whole warp
            if (row) {
                load_lane<kV>(row, lane, k[u]);
            } else {
#pragma unroll
                for (int v = 0; v < kV; ++v) k[u][v] = 0.0f;
            }
#pragma unroll
            for (int hh = 0; hh < kHB; ++hh) {
                float part = 0.0f;
#pragma unroll
                for (int v = 0; v < kV; ++v) part += q[hh][v] * k[u][v];
                s[u][hh] = part;
            }
        }
#pragma unroll
        for (int hh = 0; hh < kHB; ++hh) {
            float step_max = m[hh];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                s[u][hh] = real[u] ? dev::warp_sum(s[u][hh]) * scale : kNegInf;
                step_max = fmaxf(step_max, s[u][hh]);
            }
            // Slot 0 of a step is always a real key, so step_max is finite.
            const float corr = expf(m[hh] - step_max);
            l[hh] *= corr;
#pragma unroll
            for (int v = 0; v < kV; ++v) acc[hh][v] *= corr;
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const float e = expf(s[u][hh] - step_max);  // 0 for a padding slot (−inf)
                l[hh] += e;
#pragma unroll
                for (int v = 0; v < kV; ++v) acc[hh][v] += e * k[u][v];
            }
            m[hh] = step_max;
        }
    }

    // Merge the warps, one head at a time through shared memory.
#pragma unroll
    for (int hh = 0; hh < kHB; ++hh) {
        const int h = h0 + hh;
#pragma unroll
        for (int v = 0; v < kV; ++v) sm_acc[warp][lane_channel<kV>(lane, v)] = acc[hh][v];
        if (lane == 0) {
            sm_m[warp] = m[hh];
            sm_l[warp] = l[hh];
        }
        dev::sync_block();
        // splits == 1: the sink joins here. Else the split's own max (−inf if it saw no key).
        const float sink = a.sink[h];
        float big = splits == 1 ? sink : kNegInf;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) big = fmaxf(big, sm_m[w]);
        float denom = splits == 1 ? expf(sink - big) : 0.0f;
        float weight[kWarps];
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            weight[w] = sm_l[w] > 0.0f ? expf(sm_m[w] - big) : 0.0f;  // a warp that saw no key: m = −inf
            denom += sm_l[w] * weight[w];
        }
        if (splits == 1) {
            const float inv = 1.0f / denom;
            float* out = a.out + (static_cast<size_t>(t) * a.heads + h) * kDim;
            for (int d = static_cast<int>(dev::thread_x()); d < kDim; d += kThreads) {
                float v = 0.0f;
#pragma unroll
                for (int w = 0; w < kWarps; ++w) v += sm_acc[w][d] * weight[w];
                out[d] = v * inv;
            }
        } else {
            // Partial [max, denominator, Σ weighted keys (kDim)] of (token, head, split).
            float* part = scratch + ((static_cast<size_t>(t) * a.heads + h) * splits + split) * (kDim + 2);
            if (dev::thread_x() == 0) {
                part[0] = big;
                part[1] = denom;
            }
            for (int d = static_cast<int>(dev::thread_x()); d < kDim; d += kThreads) {
                float v = 0.0f;
#pragma unroll
                for (int w = 0; w < kWarps; ++w) v += sm_acc[w][d] * weight[w];
                part[2 + d] = v;
            }
        }
        dev::sync_block();
    }
}

// Block (head, token): merges the splits' partials and the sink.
__global__ void __launch_bounds__(kThreads) attention_combine_kernel(AttentionArgs a, int splits, const float* scratch) {
    const int h = static_cast<int>(dev::block_x());
    const int t = static_cast<int>(dev::block_y());
    const int dim = a.head_dim;
    const float* part = scratch + (static_cast<size_t>(t) * a.heads + h) * splits * (dim + 2);
    const float sink = a.sink[h];
    float big = sink;
    for (int s = 0; s < splits; ++s) big = fmaxf(big, part[static_cast<size_t>(s) * (dim + 2)]);
    float denom = expf(sink - big);
    for (int s = 0; s < splits; ++s) {
        const float* ps = part + static_cast<size_t>(s) * (dim + 2);
        if (ps[1] > 0.0f) denom += ps[1] * expf(ps[0] - big);
    }
    const float inv = 1.0f / denom;
    float* out = a.out + (static_cast<size_t>(t) * a.heads + h) * dim;
    for (int d = static_cast<int>(dev::thread_x()); d < dim; d += kThreads) {
        float v = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float* ps = part + static_cast<size_t>(s) * (dim + 2);
            if (ps[1] > 0.0f) v += ps[2 + d] * expf(ps[0] - big);
        }
        out[d] = v * inv;
    }
}

__global__ void __launch_bounds__(kThreads) ring_store_kernel(float* ring, const float* __restrict__ kv, int first,
                                                              int head_dim, int window, long long start,
                                                              const int32_t* start_at) {
    if (start_at) start = *start_at;
    const int t = first + static_cast<int>(dev::block_x());
    const long long slot = (start + t) % window;
    for (int d = static_cast<int>(dev::thread_x()); d < head_dim; d += kThreads)
        ring[slot * head_dim + d] = kv[static_cast<size_t>(t) * head_dim + d];
}

}  // namespace

int attention_splits(const AttentionArgs& a) {
    if (!a.scratch || a.n <= 0 || a.heads <= 0) return 1;
    const int groups = a.heads % 2 == 0 ? a.heads / 2 : a.heads;
    const long long blocks = static_cast<long long>(groups) * a.n;
    if (blocks >= kTargetBlocks) return 1;
    int splits = static_cast<int>((kTargetBlocks + blocks - 1) / blocks);
    // At least kMinSplitKeys keys a range (of the most any token can have): below that the
    // partials' traffic outweighs the parallelism (measured: window-only decode got slower).
    // With start_at the start is unknown here: shape for a full window and entry_count entries.
    const long long last = a.start_at ? (1ll << 40) : a.start + a.n - 1;
    long long keys = last + 1 < a.window ? last + 1 : a.window;
    if (a.entries) keys += a.selected ? a.selected_stride : visible(a.entry_count, last, a.ratio);
    const long long by_keys = (keys + kMinSplitKeys - 1) / kMinSplitKeys;
    if (by_keys < splits) splits = static_cast<int>(by_keys);
    if (splits < 1) splits = 1;
    return splits < kMaxSplits ? splits : kMaxSplits;
}

size_t attention_scratch_bytes(int n, int heads, int head_dim) {
    return static_cast<size_t>(n) * heads * kMaxSplits * (head_dim + 2) * sizeof(float);
}

namespace {
template <int kV>
void launch(const AttentionArgs& a, int splits, hipStream_t s) {
    if (a.heads % 2 == 0) {
        const dim3 grid(static_cast<unsigned>(a.heads / 2), static_cast<unsigned>(a.n * splits));
        attention_kernel<kV, 2><<<grid, dim3(kThreads), 0, s>>>(a, splits, a.scratch);
    } else {
        const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.n * splits));
        attention_kernel<kV, 1><<<grid, dim3(kThreads), 0, s>>>(a, splits, a.scratch);
    }
    AFF_GPU_CHECK(hipGetLastError());
}
}  // namespace

void attention(const AttentionArgs& a, void* stream) {
    if (a.n < 0 || a.n > 65535) throw_argument("attention", "n must be in 0..65535");
    if (a.heads <= 0 || a.window <= 0 || a.start < 0) throw_argument("attention", "heads and window must be > 0, start >= 0");
    if (a.entries && !a.selected && a.ratio <= 0) throw_argument("attention", "entries without a selection need ratio > 0");
    if (a.n == 0) return;
    const int splits = attention_splits(a);
    const hipStream_t s = static_cast<hipStream_t>(stream);
    switch (a.head_dim) {
        case 32: launch<1>(a, splits, s); break;
        case 64: launch<2>(a, splits, s); break;
        case 128: launch<4>(a, splits, s); break;
        case 256: launch<8>(a, splits, s); break;
        case kMaxDim: launch<16>(a, splits, s); break;
        default: throw_argument("attention", "head_dim must be 32, 64, 128, 256 or 512");
    }
    if (splits > 1) {
        attention_combine_kernel<<<dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.n)), dim3(kThreads), 0, s>>>(
            a, splits, a.scratch);
        AFF_GPU_CHECK(hipGetLastError());
    }
}

void ring_store(float* ring, const float* kv, int n, int head_dim, int window, int64_t start, void* stream,
                const int32_t* start_at) {
    if (n < 0 || head_dim <= 0 || window <= 0 || start < 0) throw_argument("ring_store", "bad sizes");
    const int first = n > window ? n - window : 0;
    if (n - first == 0) return;
    ring_store_kernel<<<dim3(static_cast<unsigned>(n - first)), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        ring, kv, first, head_dim, window, static_cast<long long>(start), start_at);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
