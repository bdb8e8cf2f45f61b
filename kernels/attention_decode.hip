// Decode attention for V4's MQA shape (contract in attention.hpp; the scratch path of attention()
// and attention_batch()). Every query head of a token attends to the same latent rows, so a
// block takes 16 heads of one token and one range of its keys, and reads each key row once for
// all 16 (the per-head-pair kernel in attention.hip read every row 32 times at 64 heads).
// Per tile of kTile keys (32, or 8 when a query has few keys: see decode_tile), staged in
// shared memory with the block's 16 query rows:
//   scores: a thread owns 4 heads × 4 keys over an interleaved slice of the channels (kDS
//           threads a slice set, summed by shuffles), so each shared load feeds 4 FMAs;
//   softmax: a warp per head, a lane per key: the tile's max, the rescale of the running sums,
//           the weights (online softmax, as the per-head kernel but a tile at a time);
//   values: a thread owns one 4-channel column of several heads and adds weight · key row.
// A query's keys are cut into `splits` ranges (whole tiles; the ranges past its last key are
// empty) whose partials — max, denominator, weighted sum — a second kernel merges with the sink,
// the same layout the scratch always had. Several sequences run in one launch (grid y); a
// sequence's blocks compute exactly what they compute alone. fp32 throughout, so the results
// stay within attention_max_nmse of the CPU (tensor cores would not: bf16 rounds the keys).
#include "kernels/attention.hpp"

#include "kernels/check.hpp"
#include "kernels/attention_keys.hpp"
#include "kernels/device_common.hpp"

namespace aff::gpu::attn {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kHeads = 2 * kWarps;  // per block: the softmax step gives each warp two heads
// Keys a tile. 32: 98 KiB of shared memory at head_dim 512 (opt-in below), the most work per
// shared load. 8 (49 KiB): a quarter of the work per block, so four times the blocks, for
// queries with few keys, where a launch of 32-key tiles has few, heavy blocks (a sliding layer
// at batch 1: 16 blocks of one tile each, 18.4 µs; with 8-key tiles 64 blocks, 12.5 µs, on the
// H200, tests/bench/RESULTS.md). AMD: the query rows and the tile must stay within 64 KiB of LDS,
// so always 8.
constexpr int kSmallTile = 8;
#if defined(AFF_GPU_IS_CUDA)
constexpr int kLargeTile = 32;
#else
constexpr int kLargeTile = 8;
#endif
constexpr int kMaxSplits = 64;  // the merge's one warp takes two a lane
constexpr int kTargetBlocks = 264;  // about two blocks per H200 SM
constexpr float kNegInf = -__builtin_huge_valf();

struct Batch {
    AttentionArgs seq[kAttentionMaxBatch];
    float* ring[kAttentionMaxBatch];  // store the sequence's token here (n = 1), or null
    int splits[kAttentionMaxBatch];
    int count = 0;
    int max_n = 0;
    int groups = 0;  // head groups of kHeads
    int tile = 0;    // keys a tile (kSmallTile or kLargeTile), the same for every sequence
};

__device__ inline float warp_max(float v) {
#pragma unroll
    for (int m = kWarp / 2; m > 0; m /= 2) v = fmaxf(v, dev::shfl_xor(v, m));
    return v;
}

__device__ inline float4 zero4() {
    float4 v;
    v.x = v.y = v.z = v.w = 0.0f;
    return v;
}

__device__ inline float4 madd(float4 acc, float p, float4 k) {
    acc.x = fmaf(p, k.x, acc.x);
    acc.y = fmaf(p, k.y, acc.y);
    acc.z = fmaf(p, k.z, acc.z);
    acc.w = fmaf(p, k.w, acc.w);
    return acc;
}

// Keys per range of a query with `keys` keys cut into `splits` (whole tiles), and the ranges
// that hold any: the merge reads only those, so a launch shaped for more keys than a query has
// (start_at) costs only the blocks that exit at once.
__device__ inline int range_keys(int keys, int splits, int tile) {
    return ((keys + splits - 1) / splits + tile - 1) / tile * tile;
}
__device__ inline int used_ranges(int keys, int splits, int tile) {
    const int per = range_keys(keys, splits, tile);
    return (keys + per - 1) / per;
}

// Key j of a query (as key_row in attention_keys.hpp), with the ring slot of its first window
// row computed once: no 64-bit division per row.
struct Rows {
    const float* kv;
    const float* ring;
    const float* entries;
    const int32_t* selected;  // this query's selection, or null
    long long first, start;
    int wcount, keys, window, ring_first;
};

__device__ inline const float* row_of(const Rows& r, int j, int dim) {
    if (j < r.wcount) {
        const long long pos = r.first + j;
        if (pos >= r.start) return r.kv + static_cast<size_t>(pos - r.start) * dim;
        const int slot = r.ring_first + j < r.window ? r.ring_first + j : r.ring_first + j - r.window;
        return r.ring + static_cast<size_t>(slot) * dim;
    }
    const int e = j - r.wcount;
    return r.entries + static_cast<size_t>(r.selected ? r.selected[e] : e) * dim;
}

__host__ __device__ constexpr int shared_floats(int dim, int tile) { return kHeads * dim + tile * dim + kHeads * tile + 3 * kHeads; }

// Block (split · groups + group, sequence · max_n + token). Two blocks an SM (128 registers,
// no spills at head_dim 512; 182 without the bound, which left one).
template <int kV, int kTile>
__global__ void __launch_bounds__(kThreads, 2) mqa_kernel(Batch b) {
    constexpr int kDim = kV * kWarp;
    constexpr int kC4 = kDim / 4;                  // float4 columns of a row
    constexpr int kKG = kTile / 4;                 // scores: groups of 4 keys
    constexpr int kDS = kThreads / (4 * kKG);      // scores: threads that split a (4 heads, 4 keys) cell's channels
    static_assert(kDS <= kWarp && kWarp % kDS == 0, "score cells must stay inside a warp");
    constexpr int kHR = kThreads / kC4;            // values: threads down the heads (2 at head_dim 512)
    constexpr int kHPT = kHeads / kHR > 0 ? kHeads / kHR : 1;  // heads a thread accumulates
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    float* sq = smem;                       // [kHeads][kDim] the queries
    float* sk = sq + kHeads * kDim;         // [kTile][kDim] the tile's key rows (zero past the range)
    float* sp = sk + kTile * kDim;          // [kHeads][kTile] scores, then weights
    float* sm_m = sp + kHeads * kTile;      // per head: running max,
    float* sm_l = sm_m + kHeads;            //           denominator,
    float* sm_c = sm_l + kHeads;            //           this tile's rescale
    const float4* sq4 = reinterpret_cast<const float4*>(sq);
    const float4* sk4 = reinterpret_cast<const float4*>(sk);
    const float4* sp4 = reinterpret_cast<const float4*>(sp);

    const int tid = static_cast<int>(dev::thread_x());
    const int which = static_cast<int>(dev::block_y()) / b.max_n;
    const int t = static_cast<int>(dev::block_y()) % b.max_n;
    const AttentionArgs a = dev::pick(b.seq, which);
    if (t >= a.n) return;
    const int splits = dev::pick(b.splits, which);
    const int split = static_cast<int>(dev::block_x()) / b.groups;
    const int group = static_cast<int>(dev::block_x()) % b.groups;
    if (split >= splits) return;
    const int h0 = group * kHeads;
    const int heads_here = a.heads - h0 < kHeads ? a.heads - h0 : kHeads;
    const long long start = chunk_start(a);
    const QueryKeys qk = query_keys(a, start, t);
    // The token joins the ring (n = 1, checked on the host): its slot holds position start − W,
    // which this query does not read, so no block of the launch reads what this writes.
    float* const ring = dev::pick(b.ring, which);
    if (ring && split == 0 && group == 0) {
        float* dst = ring + static_cast<size_t>((start + t) % a.window) * kDim;
        for (int d = tid; d < kDim; d += kThreads) dst[d] = a.kv[static_cast<size_t>(t) * kDim + d];
    }
    const int per_split = range_keys(qk.keys, splits, kTile);
    const int begin = split * per_split;
    const int end = begin + per_split < qk.keys ? begin + per_split : qk.keys;
    if (begin >= end) return;  // past the query's last key: the merge does not read this range
    Rows rows;
    rows.kv = a.kv;
    rows.ring = a.ring;
    rows.entries = a.entries;
    rows.selected = a.selected ? a.selected + static_cast<size_t>(t) * a.selected_stride : nullptr;
    rows.first = qk.first;
    rows.start = start;
    rows.wcount = qk.wcount;
    rows.keys = qk.keys;
    rows.window = a.window;
    rows.ring_first = static_cast<int>(qk.first % a.window);

    // The queries: every load issued before any is stored (one memory latency, not eight).
    {
        constexpr int kIters = (kHeads * kC4 + kThreads - 1) / kThreads;
        float4 v[kIters];
#pragma unroll
        for (int u = 0; u < kIters; ++u) {
            const int i = tid + u * kThreads, h = i / kC4, c = i % kC4;
            v[u] = zero4();
            if (i < kHeads * kC4 && h < heads_here)
                v[u] = reinterpret_cast<const float4*>(a.q + (static_cast<size_t>(t) * a.heads + h0 + h) * kDim)[c];
        }
#pragma unroll
        for (int u = 0; u < kIters; ++u)
            if (tid + u * kThreads < kHeads * kC4) reinterpret_cast<float4*>(sq)[tid + u * kThreads] = v[u];
    }
    if (tid < kHeads) {
        sm_m[tid] = kNegInf;
        sm_l[tid] = 0.0f;
    }
    const float scale = 1.0f / sqrtf(static_cast<float>(kDim));
    const int ds = tid % kDS, kg = (tid / kDS) % kKG, hq = tid / (kDS * kKG);  // scores
    const int pc = tid % kC4, ph = tid / kC4;                                    // values
    float4 acc[kHPT];
#pragma unroll
    for (int i = 0; i < kHPT; ++i) acc[i] = zero4();

    for (int base = begin; base < end; base += kTile) {
        const int count = end - base < kTile ? end - base : kTile;
        // The tile's rows, in batches of 8 loads a thread all in flight before the stores.
        constexpr int kIters = (kTile * kC4 + kThreads - 1) / kThreads;
        constexpr int kBatch = kIters < 8 ? kIters : 8;
        static_assert(kIters % kBatch == 0, "tile loads in whole batches");
        float4 v[kIters];
        dev::sync_block();  // the previous tile's rows and weights are used up
#pragma unroll
        for (int b0 = 0; b0 < kIters; b0 += kBatch) {
#pragma unroll
            for (int u = b0; u < b0 + kBatch; ++u) {
                const int i = tid + u * kThreads, r = i / kC4, c = i % kC4;
                v[u] = zero4();
                if (i < kTile * kC4 && r < count) v[u] = reinterpret_cast<const float4*>(row_of(rows, base + r, kDim))[c];
            }
#pragma unroll
            for (int u = b0; u < b0 + kBatch; ++u)
                if (tid + u * kThreads < kTile * kC4) reinterpret_cast<float4*>(sk)[tid + u * kThreads] = v[u];
        }
        dev::sync_block();

        // Scores of heads 4hq.. × keys 4kg.., this thread's channel slice, then summed.
        float s[4][4];
#pragma unroll
        for (int hh = 0; hh < 4; ++hh)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) s[hh][kk] = 0.0f;
        for (int c = ds; c < kC4; c += kDS) {
            float4 qv[4], kv[4];
#pragma unroll
            for (int hh = 0; hh < 4; ++hh) qv[hh] = sq4[(hq * 4 + hh) * kC4 + c];
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) kv[kk] = sk4[(kg * 4 + kk) * kC4 + c];
#pragma unroll
            for (int hh = 0; hh < 4; ++hh)
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    float d = s[hh][kk];
                    d = fmaf(qv[hh].x, kv[kk].x, d);
                    d = fmaf(qv[hh].y, kv[kk].y, d);
                    d = fmaf(qv[hh].z, kv[kk].z, d);
                    d = fmaf(qv[hh].w, kv[kk].w, d);
                    s[hh][kk] = d;
                }
        }
#pragma unroll
        for (int m = kDS / 2; m > 0; m /= 2)
#pragma unroll
            for (int hh = 0; hh < 4; ++hh)
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) s[hh][kk] += dev::shfl_xor(s[hh][kk], m);
#pragma unroll
        for (int v = 0; v < 16; ++v)
            if (v % kDS == ds) {
                const int j = kg * 4 + v % 4;
                sp[(hq * 4 + v / 4) * kTile + j] = j < count ? s[v / 4][v % 4] * scale : kNegInf;
            }
        dev::sync_block();

        // Online softmax: warp w takes heads w and w + kWarps, lane j key j.
        const int warp = tid / kWarp, lane = static_cast<int>(dev::lane_id());
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int h = warp + kWarps * i;
            const float sc = lane < kTile ? sp[h * kTile + lane] : kNegInf;
            const float m_old = sm_m[h];
            const float m_new = fmaxf(m_old, warp_max(sc));  // finite: key 0 of a tile is real
            const float p = expf(sc - m_new);                // 0 past the range (−inf)
            const float sum = dev::warp_sum(p);
            if (lane < kTile) sp[h * kTile + lane] = p;
            if (lane == 0) {
                const float corr = expf(m_old - m_new);      // 0 on the first tile (m_old = −inf)
                sm_c[h] = corr;
                sm_l[h] = sm_l[h] * corr + sum;
                sm_m[h] = m_new;
            }
        }
        dev::sync_block();

        // Values: acc[i] (head ph + kHR·i, channels 4pc..4pc+3) += weight · key row.
#pragma unroll
        for (int i = 0; i < kHPT; ++i) {
            const int h = ph + kHR * i;
            if (h < kHeads) {
                const float corr = sm_c[h];
                acc[i].x *= corr;
                acc[i].y *= corr;
                acc[i].z *= corr;
                acc[i].w *= corr;
            }
        }
        const int jend = (count + 3) & ~3;  // rows past count are zero, their weights 0
        for (int j = 0; j < jend; j += 4) {
            const float4 k0 = sk4[(j + 0) * kC4 + pc], k1 = sk4[(j + 1) * kC4 + pc];
            const float4 k2 = sk4[(j + 2) * kC4 + pc], k3 = sk4[(j + 3) * kC4 + pc];
#pragma unroll
            for (int i = 0; i < kHPT; ++i) {
                const int h = ph + kHR * i;
                if (h < kHeads) {
                    const float4 p = sp4[(h * kTile + j) / 4];
                    acc[i] = madd(madd(madd(madd(acc[i], p.x, k0), p.y, k1), p.z, k2), p.w, k3);
                }
            }
        }
    }
    dev::sync_block();  // the last tile's max and denominator

#pragma unroll
    for (int i = 0; i < kHPT; ++i) {
        const int h = ph + kHR * i;
        if (h >= heads_here) continue;
        const float m = sm_m[h], l = sm_l[h];
        if (splits == 1) {  // the sink joins here
            const int head = h0 + h;
            const float sink = a.sink[head];
            const float big = fmaxf(m, sink);
            const float w = expf(m - big);
            const float inv = 1.0f / (l * w + expf(sink - big));
            float4 o = acc[i];
            o.x = o.x * w * inv;
            o.y = o.y * w * inv;
            o.z = o.z * w * inv;
            o.w = o.w * w * inv;
            reinterpret_cast<float4*>(a.out + (static_cast<size_t>(t) * a.heads + head) * kDim)[pc] = o;
        } else {  // partial [max, denominator, Σ weighted rows] for the merge
            float* part = a.scratch + ((static_cast<size_t>(t) * a.heads + h0 + h) * splits + split) * (kDim + 2);
            if (pc == 0) {
                part[0] = m;
                part[1] = l;
            }
            part[2 + 4 * pc] = acc[i].x;
            part[3 + 4 * pc] = acc[i].y;
            part[4 + 4 * pc] = acc[i].z;
            part[5 + 4 * pc] = acc[i].w;
        }
    }
}

// Block (head, sequence · max_n + token): merges a query's ranges (those that hold keys) and
// the sink.
__global__ void __launch_bounds__(kThreads) combine_kernel(Batch b) {
    __shared__ float weight[kMaxSplits];
    __shared__ float sm_inv;
    const int which = static_cast<int>(dev::block_y()) / b.max_n;
    const int t = static_cast<int>(dev::block_y()) % b.max_n;
    const AttentionArgs a = dev::pick(b.seq, which);
    const int splits = dev::pick(b.splits, which);
    if (t >= a.n || splits == 1) return;
    const int h = static_cast<int>(dev::block_x());
    const int tid = static_cast<int>(dev::thread_x());
    const int dim = a.head_dim;
    const long long start = chunk_start(a);
    const int used = used_ranges(query_keys(a, start, t).keys, splits, b.tile);
    const float* part = a.scratch + (static_cast<size_t>(t) * a.heads + h) * splits * (dim + 2);
    if (tid < kWarp) {  // one warp: the ranges' maxima and denominators, two a lane
        const float sink = a.sink[h];
        float m[2], l[2];
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int s = tid + k * kWarp;
            m[k] = s < used ? part[static_cast<size_t>(s) * (dim + 2)] : kNegInf;
            l[k] = s < used ? part[static_cast<size_t>(s) * (dim + 2) + 1] : 0.0f;
        }
        const float big = fmaxf(sink, warp_max(fmaxf(m[0], m[1])));
        float denom = 0.0f;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int s = tid + k * kWarp;
            const float w = s < used ? expf(m[k] - big) : 0.0f;
            if (s < used) weight[s] = w;
            denom += l[k] * w;
        }
        denom = dev::warp_sum(denom) + expf(sink - big);
        if (tid == 0) sm_inv = 1.0f / denom;
    }
    dev::sync_block();
    const float inv = sm_inv;
    float* out = a.out + (static_cast<size_t>(t) * a.heads + h) * dim;
    for (int d = tid; d < dim; d += kThreads) {
        float v = 0.0f;
        for (int s = 0; s < used; ++s) v += part[static_cast<size_t>(s) * (dim + 2) + 2 + d] * weight[s];
        out[d] = v * inv;
    }
}

template <int kV, int kTile>
void launch_tile(const Batch& b, int max_splits, hipStream_t s) {
    const size_t bytes = sizeof(float) * static_cast<size_t>(shared_floats(kV * kWarp, kTile));
#if defined(AFF_GPU_IS_CUDA)
    // Over the default 48 KiB: opt in (per launch: cheap, and it holds on any device).
    AFF_GPU_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&mqa_kernel<kV, kTile>),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
#endif
    const dim3 grid(static_cast<unsigned>(max_splits * b.groups), static_cast<unsigned>(b.count * b.max_n));
    mqa_kernel<kV, kTile><<<grid, dim3(kThreads), bytes, s>>>(b);
    AFF_GPU_CHECK(hipGetLastError());
}

template <int kV>
void launch(const Batch& b, int max_splits, hipStream_t s) {
    if (b.tile == kSmallTile) launch_tile<kV, kSmallTile>(b, max_splits, s);
    else launch_tile<kV, kLargeTile>(b, max_splits, s);
}

}  // namespace

int decode_tile(const AttentionArgs& a) {
    if (a.decode_tile == kSmallTile) return kSmallTile;
    if (a.decode_tile == kLargeTile) return kLargeTile;
    if (a.decode_tile != 0) throw_argument("attention", "decode_tile must be 0 or a tile the target has (8; 32 on NVIDIA)");
    // Small tiles when a query's keys, as the kind bounds them (the window and a CSA selection;
    // HCA's entries are unbounded), fit in one small tile per range at the batch-1 split count.
    // It depends only on what the sequences of a batch share, so a sequence in a batch gets the
    // tile (and the ranges) it gets alone.
    if (a.entries && !a.selected) return kLargeTile;
    const int groups = (a.heads + kHeads - 1) / kHeads;
    const int per_query = (kTargetBlocks + groups - 1) / groups;
    const int ranges = per_query < kMaxSplits ? per_query : kMaxSplits;
    const long long bound = static_cast<long long>(a.window) + (a.selected ? a.selected_stride : 0);
    return bound <= static_cast<long long>(kSmallTile) * ranges ? kSmallTile : kLargeTile;
}

int decode_splits(const AttentionArgs& a) {
    if (a.n <= 0 || a.heads <= 0) return 1;
    const int tile = decode_tile(a);
    const long long blocks = static_cast<long long>((a.heads + kHeads - 1) / kHeads) * a.n;
    if (blocks >= kTargetBlocks) return 1;
    int splits = static_cast<int>((kTargetBlocks + blocks - 1) / blocks);
    // At least a tile a range, for the most keys any token of the launch can have. With
    // start_at the start is unknown here: shape for a full window and entry_count entries; the
    // kernel then sizes the ranges from the keys the query has, and the ranges past them are empty.
    const long long last = a.start_at ? (1ll << 40) : a.start + a.n - 1;
    long long keys = last + 1 < a.window ? last + 1 : a.window;
    if (a.entries) keys += a.selected ? a.selected_stride : visible(a.entry_count, last, a.ratio);
    const long long by_keys = (keys + tile - 1) / tile;
    if (by_keys < splits) splits = static_cast<int>(by_keys);
    if (splits < 1) splits = 1;
    return splits < kMaxSplits ? splits : kMaxSplits;
}

void decode_launch(const AttentionArgs* seqs, int count, float* const* rings, void* stream) {
    Batch b;
    b.count = count;
    b.groups = (seqs[0].heads + kHeads - 1) / kHeads;
    b.tile = decode_tile(seqs[0]);
    int max_splits = 1;
    for (int i = 0; i < count; ++i) {
        b.seq[i] = seqs[i];
        b.ring[i] = rings ? rings[i] : nullptr;
        b.splits[i] = decode_splits(seqs[i]);
        if (seqs[i].n > b.max_n) b.max_n = seqs[i].n;
        if (b.splits[i] > max_splits) max_splits = b.splits[i];
    }
    for (int i = count; i < kAttentionMaxBatch; ++i) {
        b.seq[i] = AttentionArgs{};
        b.ring[i] = nullptr;
        b.splits[i] = 1;
    }
    if (b.max_n == 0) return;
    const hipStream_t s = static_cast<hipStream_t>(stream);
    switch (seqs[0].head_dim) {
        case 32: launch<1>(b, max_splits, s); break;
        case 64: launch<2>(b, max_splits, s); break;
        case 128: launch<4>(b, max_splits, s); break;
        case 256: launch<8>(b, max_splits, s); break;
        case 512: launch<16>(b, max_splits, s); break;
        default: throw_argument("attention", "head_dim must be 32, 64, 128, 256 or 512");
    }
    if (max_splits > 1) {
        combine_kernel<<<dim3(static_cast<unsigned>(seqs[0].heads), static_cast<unsigned>(count * b.max_n)),
                         dim3(kThreads), 0, s>>>(b);
        AFF_GPU_CHECK(hipGetLastError());
    }
}

size_t decode_scratch_bytes(int n, int heads, int head_dim) {
    return static_cast<size_t>(n) * heads * kMaxSplits * (head_dim + 2) * sizeof(float);
}

}  // namespace aff::gpu::attn
