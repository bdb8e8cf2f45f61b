// Indexer kernels (declarations, layouts and contract in indexer.hpp).
// Scores: one block per (token, tile of 16 entries); the token's queries and weights and the
// tile's keys sit in shared memory, sixteen head groups each sum their heads for every entry
// of the tile, and the groups' sums are added in a fixed order.
// Both kernels take a list of sequences (each its own keys and start; tokens as rows of the
// shared activations): a launch covers a decode batch.
// Tensor-core scores (IndexerMath::bf16_mma, prefill): one block per (tile of 256 entries,
// group of 64 tokens). The tile's keys go to shared memory once, as bf16; then for each token
// of the group that sees the tile, its 64 head rows of q (bf16, zero rows past `heads`) are
// multiplied against the keys on the tensor cores (kernels/mma_tile.hpp), each warp taking 32
// entries for all heads, so ReLU, the heads' weights and the sum over heads stay in the warp
// (registers, then shuffles). q tiles are double-buffered: one barrier a token.
// Top-k: one block per token. Each entry gets a 64-bit key, the order-preserving bits of its
// score above the complement of its index, so all keys differ and "larger key" is exactly
// the CPU's order (higher score, then lower index). A radix select, eight bits a pass from the
// top, finds the smallest key among the best k (usually after the score's four bytes); the
// k keys at or above it are gathered and sorted in shared memory (bitonic).
#include "kernels/indexer.hpp"

#include "kernels/check.hpp"
#include "kernels/device_common.hpp"
#include "kernels/mma_tile.hpp"

namespace aff::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kTile = 16;     // entries per block
constexpr int kGroups = kThreads / kTile;
constexpr int kMaxQ = 8192;   // heads · head_dim in shared memory
constexpr int kTopkThreads = 1024;

__host__ __device__ inline int visible(int count, long long p, int ratio) {
    const long long v = (p + 1) / ratio;
    return v < count ? static_cast<int>(v) : count;
}

struct Batch {
    IndexerSeq seq[kIndexerMaxBatch];
    int count = 0;
    int max_n = 0;
};


// Block (entry tile, sequence · max_n + token).
__global__ void __launch_bounds__(kThreads) indexer_scores_kernel(const float* __restrict__ q, const float* __restrict__ w,
                                                                  Batch b, float* scores, int heads, int dim, int ratio,
                                                                  int stride) {
    const IndexerSeq sq_ = dev::pick(b.seq, static_cast<int>(dev::block_y()) / b.max_n);
    const int t = static_cast<int>(dev::block_y()) % b.max_n;
    if (t >= sq_.n) return;
    const long long start = sq_.start_at ? *sq_.start_at : sq_.start;
    const int count = sq_.count;
    const float* __restrict__ keys = sq_.keys;
    const int row = sq_.row + t;
    extern __shared__ float smem[];
    float* sq = smem;                          // [heads, dim]
    float* sw = sq + heads * dim;              // [heads]
    float* sk = sw + heads;                    // [kTile, dim + 1] (padded: one bank per entry)
    float* red = sk + kTile * (dim + 1);       // [kGroups, kTile]
    const int e0 = static_cast<int>(dev::block_x()) * kTile;
    const int vis = visible(count, start + t, ratio);
    if (e0 >= vis) return;  // whole block: uniform
    const int tid = static_cast<int>(dev::thread_x());
    for (int i = tid; i < heads * dim; i += kThreads) sq[i] = q[static_cast<size_t>(row) * heads * dim + i];
    for (int i = tid; i < heads; i += kThreads) sw[i] = w[static_cast<size_t>(row) * heads + i];
    for (int i = tid; i < kTile * dim; i += kThreads) {
        const int e = i / dim, c = i % dim;
        sk[e * (dim + 1) + c] = e0 + e < vis ? keys[static_cast<size_t>(e0 + e) * dim + c] : 0.0f;
    }
    dev::sync_block();
    const int e = tid % kTile, g = tid / kTile;
    const float qk_scale = 1.0f / sqrtf(static_cast<float>(dim)), head_scale = 1.0f / sqrtf(static_cast<float>(heads));
    const float* key = sk + e * (dim + 1);
    float s = 0.0f;
    for (int h = g; h < heads; h += kGroups) {
        const float* qh = sq + h * dim;
        float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
        for (int c = 0; c < dim; c += 4) {
            d0 += qh[c] * key[c];
            d1 += qh[c + 1] * key[c + 1];
            d2 += qh[c + 2] * key[c + 2];
            d3 += qh[c + 3] * key[c + 3];
        }
        const float d = (d0 + d1) + (d2 + d3);
        s += sw[h] * head_scale * (fmaxf(0.0f, d) * qk_scale);
    }
    red[g * kTile + e] = s;
    dev::sync_block();
    if (g == 0 && e0 + e < vis) {
        float total = 0.0f;
        for (int i = 0; i < kGroups; ++i) total += red[i * kTile + e];
        scores[static_cast<size_t>(row) * stride + e0 + e] = total;
    }
}

constexpr int kMmaThreads = 256;
constexpr int kMmaDim = 128;                                  // head_dim the kernel takes
constexpr int kMmaRows = 64;                                  // head rows a token (heads ≤ 64)
constexpr int kMmaEntries = 256;                              // entries a block: 32 a warp
constexpr int kMmaTokens = 64;                                // tokens a block
constexpr int kMmaLd = kMmaDim + dev::kTilePad;               // bf16 elements a tile row
constexpr int kMmaQLoads = kMmaRows * kMmaDim / 4 / kMmaThreads;  // float4 a thread a token
constexpr size_t kMmaShared =
    sizeof(uint16_t) * static_cast<size_t>(kMmaEntries + 2 * kMmaRows) * kMmaLd + sizeof(float) * 2 * kMmaRows;

// Block (entry tile, sequence · groups + token group).
__global__ void __launch_bounds__(kMmaThreads, 2)
    indexer_scores_mma_kernel(const float* __restrict__ q, const float* __restrict__ w, Batch b, float* scores,
                              int heads, int ratio, int stride, int groups) {
    const IndexerSeq sq_ = dev::pick(b.seq, static_cast<int>(dev::block_y()) / groups);
    const int group = static_cast<int>(dev::block_y()) % groups;
    const long long start = sq_.start_at ? *sq_.start_at : sq_.start;
    const int count = sq_.count;
    const int e0 = static_cast<int>(dev::block_x()) * kMmaEntries;
    int t_begin = group * kMmaTokens;
    const int t_end = sq_.n < t_begin + kMmaTokens ? sq_.n : t_begin + kMmaTokens;
    if (e0 >= count) return;  // whole block: uniform
    // visible(t) > e0 from t = ratio·(e0 + 1) − start − 1 on (visible grows with t).
    const long long first = static_cast<long long>(ratio) * (e0 + 1) - start - 1;
    if (first > t_begin) t_begin = first < t_end ? static_cast<int>(first) : t_end;
    if (t_begin >= t_end) return;

    extern __shared__ uint4 mma_smem[];
    uint16_t* ks = reinterpret_cast<uint16_t*>(mma_smem);  // [kMmaEntries][kMmaLd]
    uint16_t* qs = ks + kMmaEntries * kMmaLd;               // [2][kMmaRows][kMmaLd]
    float* ws = reinterpret_cast<float*>(qs + 2 * kMmaRows * kMmaLd);  // [2][kMmaRows]
    const int tid = static_cast<int>(dev::thread_x());
    const int warp = tid / kWarp, lane = static_cast<int>(dev::lane_id());
    const float scale = 1.0f / sqrtf(static_cast<float>(heads)) / sqrtf(static_cast<float>(kMmaDim));

    // The tile's keys as bf16; entries past count are zeros (their scores are never written).
    const int ecount = count - e0 < kMmaEntries ? count - e0 : kMmaEntries;
    const float* __restrict__ kbase = sq_.keys + static_cast<size_t>(e0) * kMmaDim;
    for (int i = tid; i < kMmaEntries * kMmaDim / 4; i += kMmaThreads) {
        const int e = i / (kMmaDim / 4), c = 4 * (i % (kMmaDim / 4));
        uint2 v{0u, 0u};
        if (e < ecount) {
            const float* p = kbase + static_cast<size_t>(e) * kMmaDim + c;
            v = uint2{dev::pack_bf16x2(p[0], p[1]), dev::pack_bf16x2(p[2], p[3])};
        }
        *reinterpret_cast<uint2*>(ks + e * kMmaLd + c) = v;
    }

    const int g = lane >> 2, t4 = lane & 3;
    const int we0 = e0 + warp * 32;  // the warp's first entry
    for (int t = t_begin; t < t_end; ++t) {
        const int buf = (t - t_begin) & 1;
        uint16_t* qb = qs + buf * kMmaRows * kMmaLd;
        float* wb = ws + buf * kMmaRows;
        const size_t row = static_cast<size_t>(sq_.row + t);
        const float4* src = reinterpret_cast<const float4*>(q + row * heads * kMmaDim);
#pragma unroll
        for (int i = 0; i < kMmaQLoads; ++i) {
            const int idx = tid + i * kMmaThreads, h = idx / (kMmaDim / 4), c = 4 * (idx % (kMmaDim / 4));
            const float4 v = h < heads ? dev::ldg(src + idx) : float4{0.0f, 0.0f, 0.0f, 0.0f};
            *reinterpret_cast<uint2*>(qb + h * kMmaLd + c) = uint2{dev::pack_bf16x2(v.x, v.y), dev::pack_bf16x2(v.z, v.w)};
        }
        if (tid < kMmaRows) wb[tid] = tid < heads ? w[row * heads + tid] * scale : 0.0f;
        dev::sync_block();  // also orders the keys' stores before the first token's products
        const int vis = visible(count, start + t, ratio);
        if (we0 < vis) {  // warp-uniform
            float acc[4][4][4] = {};
#pragma unroll
            for (int k0 = 0; k0 < kMmaDim; k0 += 16)
                dev::warp_mma_k16<4, 4>(qb, kMmaLd, 0, ks, kMmaLd, warp * 32, k0, acc);
            // Row 16·mt + g (+8) is a head, column 8·nt + 2·t4 (+1) an entry of the warp.
            float s[4][2] = {};
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const float wh = wb[16 * mt + g + 8 * hh];
#pragma unroll
                    for (int nt = 0; nt < 4; ++nt) {
                        s[nt][0] += wh * fmaxf(0.0f, acc[mt][nt][2 * hh]);
                        s[nt][1] += wh * fmaxf(0.0f, acc[mt][nt][2 * hh + 1]);
                    }
                }
            // Sum over the eight row groups (lanes with equal t4); every lane gets the totals.
#pragma unroll
            for (int m = 4; m < 32; m <<= 1)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    s[nt][0] += dev::shfl_xor(s[nt][0], m);
                    s[nt][1] += dev::shfl_xor(s[nt][1], m);
                }
            // Lane (g, t4) writes column 8·(g/2) + 2·t4 + g%2: the warp's 32 entries once each.
            float v = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c)
                    if (2 * nt + c == g) v = s[nt][c];
            const int e = we0 + 8 * (g >> 1) + 2 * t4 + (g & 1);
            if (e < vis) scores[row * stride + e] = v;
        }
    }
}

// Order-preserving key: score bits (−0 as +0) above the complemented index.
__device__ inline unsigned long long sort_key(float score, int index) {
    unsigned bits = score == 0.0f ? 0u : dev::float_to_bits(score);
    bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return (static_cast<unsigned long long>(bits) << 32) | (0xffffffffu - static_cast<unsigned>(index));
}

// Block (sequence · max_n + token).
__global__ void __launch_bounds__(kTopkThreads) indexer_topk_kernel(const float* __restrict__ scores, int stride, Batch b,
                                                                    int ratio, int k, int32_t* selected,
                                                                    int32_t* selected_count) {
    const IndexerSeq sq = dev::pick(b.seq, static_cast<int>(dev::block_x()) / b.max_n);
    const int tok = static_cast<int>(dev::block_x()) % b.max_n;
    if (tok >= sq.n) return;
    const long long start = sq.start_at ? *sq.start_at : sq.start;
    const int count = sq.count;
    __shared__ unsigned hist[256];
    __shared__ unsigned long long s_prefix, s_mask;
    __shared__ unsigned s_remaining, s_found;
    __shared__ int s_done;
    __shared__ unsigned long long buf[kIndexerMaxTopk];
    const int t = sq.row + tok;  // the token's row
    const int tid = static_cast<int>(dev::thread_x());
    const int vis = visible(count, start + tok, ratio);
    const int keep = vis < k ? vis : k;
    const float* row = scores + static_cast<size_t>(t) * stride;
    int32_t* out = selected + static_cast<size_t>(t) * k;
    if (tid == 0) selected_count[t] = keep;
    if (keep == 0) {
        for (int i = tid; i < k; i += kTopkThreads) out[i] = -1;
        return;
    }
    if (tid == 0) {
        s_prefix = 0;
        s_mask = 0;
        s_remaining = static_cast<unsigned>(keep);
        s_done = 0;
    }
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += kTopkThreads) hist[b] = 0;
        dev::sync_block();
        const unsigned long long prefix = s_prefix, mask = s_mask;
        for (int e = tid; e < vis; e += kTopkThreads) {
            const unsigned long long key = sort_key(row[e], e);
            if ((key & mask) == prefix) dev::atomic_add(&hist[(key >> shift) & 255u], 1u);
        }
        dev::sync_block();
        if (tid == 0) {
            unsigned above = 0;
            for (int b = 255; b >= 0; --b) {
                const unsigned h = hist[b];
                if (above + h >= s_remaining) {
                    s_prefix = prefix | (static_cast<unsigned long long>(b) << shift);
                    s_mask = mask | (255ull << shift);
                    s_remaining -= above;
                    s_done = h == s_remaining;  // every key of the new prefix is among the best k
                    break;
                }
                above += h;
            }
        }
        dev::sync_block();
        if (s_done) break;
    }
    // The best k: keys whose masked bits are at or above the prefix (exactly `keep` of them).
    const unsigned long long prefix = s_prefix, mask = s_mask;
    if (tid == 0) s_found = 0;
    dev::sync_block();
    for (int e = tid; e < vis; e += kTopkThreads) {
        const unsigned long long key = sort_key(row[e], e);
        if ((key & mask) >= prefix) buf[dev::atomic_add(&s_found, 1u)] = key;
    }
    int size = 1;
    while (size < keep) size <<= 1;
    dev::sync_block();
    for (int i = keep + tid; i < size; i += kTopkThreads) buf[i] = 0;  // below every real key
    dev::sync_block();
    for (int span = 2; span <= size; span <<= 1) {
        for (int gap = span / 2; gap > 0; gap >>= 1) {
            for (int i = tid; i < size; i += kTopkThreads) {
                const int j = i ^ gap;
                if (j > i) {
                    const unsigned long long x = buf[i], y = buf[j];
                    const bool descending = (i & span) == 0;
                    if (descending ? x < y : x > y) {
                        buf[i] = y;
                        buf[j] = x;
                    }
                }
            }
            dev::sync_block();
        }
    }
    for (int i = tid; i < k; i += kTopkThreads)
        out[i] = i < keep ? static_cast<int32_t>(0xffffffffu - static_cast<unsigned>(buf[i] & 0xffffffffu)) : -1;
}

}  // namespace

namespace {
void check_scores(int n, int heads, int head_dim, int64_t start, int ratio, int count) {
    if (n < 0 || n > 65535 || heads <= 0 || head_dim <= 0 || head_dim % 4 != 0 || heads * head_dim > kMaxQ)
        throw_argument("indexer_scores", "heads · head_dim must be at most 8192, head_dim a multiple of 4, n <= 65535");
    if (ratio <= 0 || count < 0 || start < 0) throw_argument("indexer_scores", "ratio must be > 0, count and start >= 0");
}

// The most entries any token of the sequence may see (with start_at: count bounds them).
int most_visible(const IndexerSeq& s, int ratio) {
    return s.start_at ? s.count : visible(s.count, s.start + s.n - 1, ratio);
}

void launch_scores(const float* q, const float* w, float* scores, const Batch& b, int heads, int head_dim, int ratio,
                   int stride, int vis, hipStream_t s) {
    if (b.max_n == 0 || vis == 0) return;
    if (stride < vis) throw_argument("indexer_scores", "stride is smaller than the visible entries");
    const size_t shared = sizeof(float) * (static_cast<size_t>(heads) * head_dim + heads + kTile * (head_dim + 1) +
                                           kGroups * kTile);
    if (shared > 48 * 1024) throw_argument("indexer_scores", "shapes need more than 48 KiB of shared memory");
    const dim3 grid(static_cast<unsigned>((vis + kTile - 1) / kTile), static_cast<unsigned>(b.count * b.max_n));
    indexer_scores_kernel<<<grid, dim3(kThreads), shared, s>>>(q, w, b, scores, heads, head_dim, ratio, stride);
    AFF_GPU_CHECK(hipGetLastError());
}

void launch_scores_mma(const float* q, const float* w, float* scores, const Batch& b, int heads, int ratio,
                       int stride, int vis, hipStream_t s) {
    if (b.max_n == 0 || vis == 0) return;
    if (stride < vis) throw_argument("indexer_scores", "stride is smaller than the visible entries");
#if defined(AFF_GPU_IS_CUDA)
    // Over the default 48 KiB: opt in (per launch: cheap, and it holds on any device).
    AFF_GPU_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&indexer_scores_mma_kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMmaShared)));
#endif
    const int groups = (b.max_n + kMmaTokens - 1) / kMmaTokens;
    const dim3 grid(static_cast<unsigned>((vis + kMmaEntries - 1) / kMmaEntries), static_cast<unsigned>(b.count * groups));
    indexer_scores_mma_kernel<<<grid, dim3(kMmaThreads), kMmaShared, s>>>(q, w, b, scores, heads, ratio, stride, groups);
    AFF_GPU_CHECK(hipGetLastError());
}

void launch_topk(const float* scores, int stride, const Batch& b, int ratio, int k, int32_t* selected,
                 int32_t* selected_count, hipStream_t s) {
    if (b.max_n == 0) return;
    indexer_topk_kernel<<<dim3(static_cast<unsigned>(b.count * b.max_n)), dim3(kTopkThreads), 0, s>>>(
        scores, stride, b, ratio, k, selected, selected_count);
    AFF_GPU_CHECK(hipGetLastError());
}

Batch single(const float* keys, int n, int64_t start, int count, const int32_t* start_at) {
    Batch b;
    b.seq[0].keys = keys;
    b.seq[0].n = n;
    b.seq[0].start = start;
    b.seq[0].start_at = start_at;
    b.seq[0].count = count;
    b.count = 1;
    b.max_n = n;
    return b;
}
}  // namespace

bool indexer_mma_takes(int heads, int head_dim, const float* q) {
    return heads >= 1 && heads <= kMmaRows && head_dim == kMmaDim && reinterpret_cast<uintptr_t>(q) % 16 == 0;
}

void indexer_scores(const float* q, const float* w, const float* keys, float* scores, int n, int heads, int head_dim,
                    int64_t start, int ratio, int count, int stride, void* stream, const int32_t* start_at,
                    IndexerMath math) {
    check_scores(n, heads, head_dim, start, ratio, count);
    const Batch b = single(keys, n, start, count, start_at);
    const int vis = most_visible(b.seq[0], ratio);
    if (math == IndexerMath::bf16_mma && indexer_mma_takes(heads, head_dim, q))
        launch_scores_mma(q, w, scores, b, heads, ratio, stride, vis, static_cast<hipStream_t>(stream));
    else
        launch_scores(q, w, scores, b, heads, head_dim, ratio, stride, vis, static_cast<hipStream_t>(stream));
}

void indexer_topk(const float* scores, int n, int stride, int64_t start, int ratio, int count, int k, int32_t* selected,
                  int32_t* selected_count, void* stream, const int32_t* start_at) {
    if (k <= 0 || k > kIndexerMaxTopk) throw_argument("indexer_topk", "k must be in 1..2048");
    if (n < 0 || ratio <= 0 || count < 0 || start < 0) throw_argument("indexer_topk", "bad sizes");
    if (n == 0) return;
    launch_topk(scores, stride, single(nullptr, n, start, count, start_at), ratio, k, selected, selected_count,
                static_cast<hipStream_t>(stream));
}

void indexer_batch(const float* q, const float* w, float* scores, int32_t* selected, int32_t* selected_count,
                   const IndexerSeq* seqs, int count, int heads, int head_dim, int ratio, int stride, int k,
                   void* stream, IndexerMath math) {
    if (count < 1 || count > kIndexerMaxBatch) throw_argument("indexer_batch", "1 to 4 sequences a launch");
    if (k <= 0 || k > kIndexerMaxTopk) throw_argument("indexer_topk", "k must be in 1..2048");
    Batch b;
    b.count = count;
    int vis = 0;
    for (int i = 0; i < count; ++i) {
        check_scores(seqs[i].n, heads, head_dim, seqs[i].start, ratio, seqs[i].count);
        if (seqs[i].row < 0) throw_argument("indexer_batch", "row must be >= 0");
        b.seq[i] = seqs[i];
        if (seqs[i].n > b.max_n) b.max_n = seqs[i].n;
        if (seqs[i].n > 0) {
            const int v = most_visible(seqs[i], ratio);
            vis = v > vis ? v : vis;
        }
    }
    const hipStream_t s = static_cast<hipStream_t>(stream);
    if (math == IndexerMath::bf16_mma && indexer_mma_takes(heads, head_dim, q))
        launch_scores_mma(q, w, scores, b, heads, ratio, stride, vis, s);
    else
        launch_scores(q, w, scores, b, heads, head_dim, ratio, stride, vis, s);
    launch_topk(scores, stride, b, ratio, k, selected, selected_count, s);
}

}  // namespace aff::gpu
