// Attention kernel for prefill chunks (declarations, layouts and contract in attention.hpp;
// calls with decode scratch take kernels/attention_decode.hip). One block per (head pair,
// token); its eight warps take the query's keys in turn, two keys per step, each warp keeping
// an online softmax per head (running max, denominator and weighted sum of the keys it saw);
// each key row a warp loads serves both heads. The warps' partials and the sink are merged in
// shared memory. A lane holds head_dim / 32 channels (for head_dim ≥ 128 four of each
// 128-channel slice): key rows are read as coalesced loads, 16 bytes a lane where the row
// allows it.
#include "kernels/attention.hpp"

#include "kernels/check.hpp"
#include "kernels/attention_keys.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kMaxDim = 512;
constexpr float kNegInf = -__builtin_huge_valf();
using attn::key_row;
using attn::query_keys;

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

// Block (head group, token): kHB heads share every key row a warp loads. kV = head_dim / 32
// channels per lane.
template <int kV, int kHB>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a) {
    constexpr int kDim = kV * kWarp;
    constexpr int kUnroll = kHB == 1 ? 4 : 2;  // keys per warp step: independent loads in flight
    __shared__ float sm_acc[kWarps][kDim];
    __shared__ float sm_m[kWarps], sm_l[kWarps];
    const int h0 = static_cast<int>(dev::block_x()) * kHB;
    const int t = static_cast<int>(dev::block_y());
    const int warp = static_cast<int>(dev::thread_x()) / kWarp;
    const int lane = static_cast<int>(dev::lane_id());
    const long long start = attn::chunk_start(a);
    const attn::QueryKeys qk = a.ring_first >= 0 ? attn::block_keys(a, start) : query_keys(a, start, t);
    const long long first = qk.first;
    const int wcount = qk.wcount, keys = qk.keys;
    const int begin = 0, end = keys;

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
        const float sink = a.sink[h];
        float big = sink;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) big = fmaxf(big, sm_m[w]);
        float denom = expf(sink - big);
        float weight[kWarps];
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            weight[w] = sm_l[w] > 0.0f ? expf(sm_m[w] - big) : 0.0f;  // a warp that saw no key: m = −inf
            denom += sm_l[w] * weight[w];
        }
        const float inv = 1.0f / denom;
        float* out = a.out + (static_cast<size_t>(t) * a.heads + h) * kDim;
        for (int d = static_cast<int>(dev::thread_x()); d < kDim; d += kThreads) {
            float v = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) v += sm_acc[w][d] * weight[w];
            out[d] = v * inv;
        }
        dev::sync_block();
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

int attention_splits(const AttentionArgs& a) { return a.scratch ? attn::decode_splits(a) : 1; }

int attention_tile(const AttentionArgs& a) { return attn::decode_tile(a); }

size_t attention_scratch_bytes(int n, int heads, int head_dim) { return attn::decode_scratch_bytes(n, heads, head_dim); }

namespace {
template <int kV>
void launch(const AttentionArgs& a, hipStream_t s) {
    if (a.heads % 2 == 0) {
        const dim3 grid(static_cast<unsigned>(a.heads / 2), static_cast<unsigned>(a.n));
        attention_kernel<kV, 2><<<grid, dim3(kThreads), 0, s>>>(a);
    } else {
        const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.n));
        attention_kernel<kV, 1><<<grid, dim3(kThreads), 0, s>>>(a);
    }
    AFF_GPU_CHECK(hipGetLastError());
}

void check_args(const AttentionArgs& a, const char* who) {
    if (a.n < 0 || a.n > 65535) throw_argument(who, "n must be in 0..65535");
    if (a.heads <= 0 || a.window <= 0 || a.start < 0) throw_argument(who, "heads and window must be > 0, start >= 0");
    if (a.entries && !a.selected && a.ratio <= 0) throw_argument(who, "entries without a selection need ratio > 0");
    if (a.ring_first >= 0 && (a.entries || a.scratch || a.start_at))
        throw_argument(who, "block mode (ring_first) takes no entries, scratch or start_at");
    switch (a.head_dim) {
        case 32: case 64: case 128: case 256: case kMaxDim: break;
        default: throw_argument(who, "head_dim must be 32, 64, 128, 256 or 512");
    }
}
}  // namespace

void attention(const AttentionArgs& a, void* stream) {
    check_args(a, "attention");
    if (a.n == 0) return;
    if (a.scratch) return attn::decode_launch(&a, 1, nullptr, stream);
    const hipStream_t s = static_cast<hipStream_t>(stream);
    switch (a.head_dim) {
        case 32: launch<1>(a, s); break;
        case 64: launch<2>(a, s); break;
        case 128: launch<4>(a, s); break;
        case 256: launch<8>(a, s); break;
        default: launch<16>(a, s); break;
    }
}

void attention_batch(const AttentionArgs* seqs, int count, float* const* rings, void* stream) {
    if (count < 1 || count > kAttentionMaxBatch) throw_argument("attention_batch", "1 to 4 sequences a launch");
    for (int i = 0; i < count; ++i) {
        const AttentionArgs& a = seqs[i];
        check_args(a, "attention_batch");
        if (!a.scratch) throw_argument("attention_batch", "every sequence needs its decode scratch");
        const AttentionArgs& z = seqs[0];
        if (a.heads != z.heads || a.head_dim != z.head_dim || a.window != z.window || !a.entries != !z.entries ||
            !a.selected != !z.selected)
            throw_argument("attention_batch", "the sequences differ in heads, head_dim, window or kind");
        if (rings && (!rings[i] || rings[i] != a.ring || a.n != 1))
            throw_argument("attention_batch", "storing the ring needs each sequence's own ring and one token");
    }
    attn::decode_launch(seqs, count, rings, stream);
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
