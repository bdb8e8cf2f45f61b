// Indexer kernels (declarations, layouts and contract in indexer.hpp).
// Scores: one block per (token, tile of 16 entries); the token's queries and weights and the
// tile's keys sit in shared memory, sixteen head groups each sum their heads for every entry
// of the tile, and the groups' sums are added in a fixed order.
// Both kernels take a list of sequences (each its own keys and start; tokens as rows of the
// shared activations): a launch covers a decode batch.
// Top-k: one block per token. Each entry gets a 64-bit key, the order-preserving bits of its
// score above the complement of its index, so all keys differ and "larger key" is exactly
// the CPU's order (higher score, then lower index). A radix select, eight bits a pass from the
// top, finds the smallest key among the best k (usually after the score's four bytes); the
// k keys at or above it are gathered and sorted in shared memory (bitonic).
#include "kernels/indexer.hpp"

#include "aff/gpu/check.hpp"
#include "kernels/device_common.hpp"

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

// Sequence i of the batch by value; the unrolled constant indices keep it in parameter space.
__device__ inline IndexerSeq pick(const Batch& b, int i) {
    IndexerSeq s = b.seq[0];
#pragma unroll
    for (int k = 1; k < kIndexerMaxBatch; ++k)
        if (i == k) s = b.seq[k];
    return s;
}

// Block (entry tile, sequence · max_n + token).
__global__ void __launch_bounds__(kThreads) indexer_scores_kernel(const float* __restrict__ q, const float* __restrict__ w,
                                                                  Batch b, float* scores, int heads, int dim, int ratio,
                                                                  int stride) {
    const IndexerSeq sq_ = pick(b, static_cast<int>(dev::block_y()) / b.max_n);
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
    const IndexerSeq sq = pick(b, static_cast<int>(dev::block_x()) / b.max_n);
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

void indexer_scores(const float* q, const float* w, const float* keys, float* scores, int n, int heads, int head_dim,
                    int64_t start, int ratio, int count, int stride, void* stream, const int32_t* start_at) {
    check_scores(n, heads, head_dim, start, ratio, count);
    const Batch b = single(keys, n, start, count, start_at);
    launch_scores(q, w, scores, b, heads, head_dim, ratio, stride, most_visible(b.seq[0], ratio),
                  static_cast<hipStream_t>(stream));
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
                   void* stream) {
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
    launch_scores(q, w, scores, b, heads, head_dim, ratio, stride, vis, s);
    launch_topk(scores, stride, b, ratio, k, selected, selected_count, s);
}

}  // namespace aff::gpu
