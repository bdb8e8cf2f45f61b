// Attention kernel (declarations, layouts and contract in attention.hpp). One block per
// (head, token); its eight warps take the query's keys in turn, four keys per step, each warp
// keeping an online softmax (running max, denominator and weighted sum of the keys it saw);
// the warps' partial results and the sink logit are merged at the end. A lane holds four
// channels of each 128-channel slice, so a key row is read as coalesced 16-byte loads.
#include "kernels/attention.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kUnroll = 4;    // keys per warp step: independent loads in flight
constexpr int kMaxDim = 512;
constexpr float kNegInf = -__builtin_huge_valf();

__device__ inline int visible(int count, long long p, int ratio) {
    const long long v = (p + 1) / ratio;
    return v < count ? static_cast<int>(v) : count;
}

// kC = head_dim / 128 float4 slices per lane.
template <int kC>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a) {
    constexpr int kDim = kC * 128;
    __shared__ float sm_acc[kWarps][kDim];
    __shared__ float sm_m[kWarps], sm_l[kWarps];
    const int h = static_cast<int>(dev::block_x());
    const int t = static_cast<int>(dev::block_y());
    const int warp = static_cast<int>(dev::thread_x()) / kWarp;
    const int lane = static_cast<int>(dev::lane_id());
    const long long p = a.start + t;
    const long long first = p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    const int wcount = static_cast<int>(p - first + 1);
    int ecount = 0;
    if (a.entries) ecount = a.selected ? a.selected_count[t] : visible(a.entry_count, p, a.ratio);
    const int keys = wcount + ecount;

    const float4* q4 = reinterpret_cast<const float4*>(a.q + (static_cast<size_t>(t) * a.heads + h) * kDim);
    float4 q[kC], acc[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) {
        q[c] = q4[c * kWarp + lane];
        acc[c] = float4{0.0f, 0.0f, 0.0f, 0.0f};
    }
    const float scale = 1.0f / sqrtf(static_cast<float>(kDim));
    float m = kNegInf, l = 0.0f;

    for (int base = warp * kUnroll; base < keys; base += kWarps * kUnroll) {
        float4 k[kUnroll][kC];
        float s[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int j = base + u;
            const float* row = nullptr;
            if (j < wcount) {
                const long long pos = first + j;
                row = pos >= a.start ? a.kv + static_cast<size_t>(pos - a.start) * kDim
                                     : a.ring + static_cast<size_t>(pos % a.window) * kDim;
            } else if (j < keys) {
                const int e = j - wcount;
                const int idx = a.selected ? a.selected[static_cast<size_t>(t) * a.selected_stride + e] : e;
                row = a.entries + static_cast<size_t>(idx) * kDim;
            }
            float part = 0.0f;
#pragma unroll
            for (int c = 0; c < kC; ++c) {
                k[u][c] = row ? reinterpret_cast<const float4*>(row)[c * kWarp + lane] : float4{0.0f, 0.0f, 0.0f, 0.0f};
                part += q[c].x * k[u][c].x + q[c].y * k[u][c].y + q[c].z * k[u][c].z + q[c].w * k[u][c].w;
            }
            s[u] = row ? part : kNegInf;
        }
        float step_max = m;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (s[u] != kNegInf) s[u] = dev::warp_sum(s[u]) * scale;
            step_max = fmaxf(step_max, s[u]);
        }
        // The first key of a warp is always real, so step_max is finite here.
        const float corr = expf(m - step_max);
        l *= corr;
#pragma unroll
        for (int c = 0; c < kC; ++c) {
            acc[c].x *= corr;
            acc[c].y *= corr;
            acc[c].z *= corr;
            acc[c].w *= corr;
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const float e = expf(s[u] - step_max);  // 0 for a padding slot (−inf)
            l += e;
#pragma unroll
            for (int c = 0; c < kC; ++c) {
                acc[c].x += e * k[u][c].x;
                acc[c].y += e * k[u][c].y;
                acc[c].z += e * k[u][c].z;
                acc[c].w += e * k[u][c].w;
            }
        }
        m = step_max;
    }

#pragma unroll
    for (int c = 0; c < kC; ++c) reinterpret_cast<float4*>(sm_acc[warp])[c * kWarp + lane] = acc[c];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
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
}

__global__ void __launch_bounds__(kThreads) ring_store_kernel(float* ring, const float* __restrict__ kv, int first,
                                                              int head_dim, int window, long long start) {
    const int t = first + static_cast<int>(dev::block_x());
    const long long slot = (start + t) % window;
    for (int d = static_cast<int>(dev::thread_x()); d < head_dim; d += kThreads)
        ring[slot * head_dim + d] = kv[static_cast<size_t>(t) * head_dim + d];
}

}  // namespace

void attention(const AttentionArgs& a, void* stream) {
    if (a.n < 0 || a.n > 65535) throw_argument("attention", "n must be in 0..65535");
    if (a.heads <= 0 || a.window <= 0 || a.start < 0) throw_argument("attention", "heads and window must be > 0, start >= 0");
    if (a.entries && !a.selected && a.ratio <= 0) throw_argument("attention", "entries without a selection need ratio > 0");
    if (a.n == 0) return;
    const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.n));
    const hipStream_t s = static_cast<hipStream_t>(stream);
    switch (a.head_dim) {
        case 128: attention_kernel<1><<<grid, dim3(kThreads), 0, s>>>(a); break;
        case 256: attention_kernel<2><<<grid, dim3(kThreads), 0, s>>>(a); break;
        case kMaxDim: attention_kernel<4><<<grid, dim3(kThreads), 0, s>>>(a); break;
        default: throw_argument("attention", "head_dim must be 128, 256 or 512");
    }
    AFF_GPU_CHECK(hipGetLastError());
}

void ring_store(float* ring, const float* kv, int n, int head_dim, int window, int64_t start, void* stream) {
    if (n < 0 || head_dim <= 0 || window <= 0 || start < 0) throw_argument("ring_store", "bad sizes");
    const int first = n > window ? n - window : 0;
    if (n - first == 0) return;
    ring_store_kernel<<<dim3(static_cast<unsigned>(n - first)), dim3(kThreads), 0, static_cast<hipStream_t>(stream)>>>(
        ring, kv, first, head_dim, window, static_cast<long long>(start));
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
