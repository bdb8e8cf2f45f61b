// The attention-side steps of the CPU forward (model doc §3.4-§3.8, §4), as free functions
// on plain arrays: Model::attention calls them, and the GPU kernels of the same steps
// (kernels/attention.hpp, kernels/compressor.hpp, kernels/indexer.hpp) are checked against
// them, so the CPU reference is the twin and there is no second CPU implementation.
// Every array is float32, row-major, in the layout its comment gives.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"

#include <cstdint>
#include <vector>

namespace aff {

// Compressed windows visible to the query at position p (§3.5): those whose last token
// is at or before p, i.e. min(count, (p + 1) / ratio).
inline int visible_entries(int count, std::int64_t p, int ratio) {
    const std::int64_t v = (p + 1) / ratio;
    return v < count ? static_cast<int>(v) : count;
}

// Which compressed entries each of the n queries attends, after its window keys.
struct AttendEntries {
    const float* entries = nullptr;  // [count, Dh]; null: sliding window only
    int count = 0;                   // entries emitted so far (those of this chunk included)
    int ratio = 0;                   // compress ratio (for the visibility rule)
    // CSA: explicit lists, [n, stride] indices into entries with index_count[t] valid per
    // token (the indexer's top-k, best first). Null (HCA): every visible entry, in order.
    const std::int32_t* index = nullptr;
    const std::int32_t* index_count = nullptr;
    int stride = 0;
};

struct AttendShape {
    int n = 0;              // queries: positions start .. start + n - 1
    int heads = 0;          // H
    int head_dim = 0;       // Dh
    int window = 0;         // W (the window includes the current token)
    std::int64_t start = 0;
};

// §3.4/§3.8 core: o[t, h] = Σ_j softmax_j(q·k_j / √Dh, with the sink logit sink[h] in the
// denominator) · k_j over the keys of query t: first the window positions max(0, p−W+1)..p
// (kv[j − start] for j ≥ start, else ring[j mod W]), then the selected entries. q [n, H, Dh]
// (normalised, RoPE'd), kv [n, Dh] (this chunk's latents), ring [W, Dh] (positions < start),
// o [n, H, Dh] before the inverse rotation. Keys are shared by every head (MQA).
void attend(ThreadPool& pool, const AttendShape& s, const float* q, const float* kv, const float* ring,
            const AttendEntries& e, const float* sink, float* o);

// The DSpark draft block's attention (§5.2 step 2): every one of the n block queries (positions
// start .. start + n - 1) sees the ring's positions max(0, ring_first, start - W) .. start - 1
// (ring[j mod W]; the trunk-confirmed context) and then all n block keys kv [n, Dh], with no
// causal mask inside the block. Otherwise as attend (sink, shared keys, no inverse rotation).
void attend_block(ThreadPool& pool, const AttendShape& s, const float* q, const float* kv, const float* ring,
                  std::int64_t ring_first, const float* sink, float* o);

// The ring keeps the last W latents: slot (start + t) mod W ← kv[t] for the chunk's last
// min(n, W) tokens. Written after every query of the chunk has read the ring.
void ring_store(float* ring, const float* kv, int n, int head_dim, int window, std::int64_t start);

// One compressor's constants (§3.5): ratio r, entry width dim, CSA overlap (projections 2·dim
// wide: Ca | Cb), ape [r, width], norm [dim], and the compress RoPE table on the last
// inv_freq.size() · 2 channels.
struct CompressorParams {
    int ratio = 0;
    int dim = 0;
    bool overlap = false;
    const float* ape = nullptr;
    const float* norm = nullptr;
    double eps = 1e-6;
    const std::vector<float>* inv_freq = nullptr;
};

// §4.3 step 2 after the projections: appends the chunk's kv [n, width] and gate [n, width]
// (raw projections; ape is added here) to the pending window of `st`, emitting one
// normalised, RoPE'd entry each time a window of r tokens completes.
void compress_tokens(const CompressorParams& p, CompressorState& st, std::int64_t start, int n, const float* kv,
                     const float* gate);

// §3.7 Lightning indexer scores: for query t and entry e < visible_entries(count, start+t,
// ratio), scores[t, e] = Σ_h w[t, h] / √Hi · max(0, q[t, h] · key[e]) / √Di.
// q [n, Hi, Di] (RoPE'd), w [n, Hi], keys [count, Di], scores [n, stride]; entries past a
// token's visible count are left untouched.
void index_scores(ThreadPool& pool, int n, std::int64_t start, int heads, int head_dim, int ratio, int count,
                  const float* q, const float* w, const float* keys, float* scores, int stride);

// The top min(k, visible) of scores[0, visible), best first; equal scores by lower index.
// Writes them to out and returns how many.
int select_topk(const float* scores, int visible, int k, std::int32_t* out);

}  // namespace aff
