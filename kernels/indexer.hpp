// The Lightning indexer on the GPU (model doc §3.7): index scores of each query against the
// indexer's compressed keys, then the top-k selection that CSA attention reads
// (kernels/attention.hpp, AttentionArgs::selected). CPU twins: aff::index_scores and
// aff::select_topk (libaff/model/attention_ops.hpp), the CPU forward's own code.
//
// Layouts (row-major, device memory):
//   q        [n, heads, head_dim] float  indexer queries (wq_b · cq), RoPE'd at their positions
//   w        [n, heads]           float  per-head weights (index_weights · a)
//   keys     [count, head_dim]    float  the indexer compressor's entries
//   scores   [n, stride]          float  scores[t, e] for e < visible(t) = min(count, (start+t+1)/ratio)
//   selected [n, k]               int32  the top min(k, visible(t)) entries, best first, equal
//                                        scores by lower index; unused slots hold −1
//   selected_count [n]            int32  min(k, visible(t))
#pragma once

#include <cstdint>

namespace aff::gpu {

// How the scores are computed. fp32: fp32 dot products on the CUDA cores (the exact path and
// decode). bf16_mma: the prefill path (calls the forward runs through its GEMMs): q and keys
// rounded to bf16 (round to nearest even), the heads' dot products on the tensor cores
// (mma.sync m16n8k16, fp32 accumulation), ReLU and the weighted sum over heads in fp32 — the
// reference implementation's own precision (model doc §3.11: a bf16 einsum). Taken when
// indexer_mma_takes; other shapes fall back to fp32.
enum class IndexerMath { fp32, bf16_mma };

// heads 1..64, head_dim 128, q 16-byte aligned (V4-Flash: 64 × 128).
bool indexer_mma_takes(int heads, int head_dim, const float* q);

// Error of bf16_mma against the fp32 scores, per score: at most kIndexerMmaErrorFactor times
// the score's magnitude sum Σ_h |w_h|/√heads · Σ_c |q_hc|·|k_c|/√head_dim (what indexer_scores
// returns for |q|, |w|, |keys|). Rounding q and k to bf16 (unit roundoff u = 2^-9) changes each
// product by at most (2u + u²)|q·k|, ReLU does not increase a difference, and both kernels'
// fp32 sums (≤ 128 + 64 + 16 terms) add at most 2 · 208 · 2^-24 relative to the same sum.
inline constexpr double kIndexerMmaErrorFactor = 1.0 / 256 + 1.0 / 262144 + 2.5e-5;

// Graph replay: start_at as AttentionArgs::start_at (kernels/attention.hpp); `count` then
// bounds the entries any start may see (the state's capacity) and shapes the launch.

// scores[t, e] = Σ_h w[t, h] / √heads · max(0, q[t, h] · keys[e]) / √head_dim.
// heads · head_dim at most 8192 and head_dim a multiple of 4; entries past visible(t) untouched.
void indexer_scores(const float* q, const float* w, const float* keys, float* scores, int n, int heads, int head_dim,
                    int64_t start, int ratio, int count, int stride, void* stream,
                    const int32_t* start_at = nullptr, IndexerMath math = IndexerMath::fp32);

// k at most 2048 (V4-Flash: 512). -0 and +0 are equal scores, as on the CPU.
void indexer_topk(const float* scores, int n, int stride, int64_t start, int ratio, int count, int k,
                  int32_t* selected, int32_t* selected_count, void* stream, const int32_t* start_at = nullptr);

inline constexpr int kIndexerMaxTopk = 2048;

// Several sequences' tokens in the same two launches (scores, then top-k): the forward's decode
// batch. Sequence i's tokens are rows row .. row+n−1 of q [rows, heads, head_dim], w [rows,
// heads], scores [rows, stride], selected [rows, k] and selected_count [rows]; its keys, start
// (or start_at) and count are its own. Each sequence's results are exactly indexer_scores and
// indexer_topk on it alone.
inline constexpr int kIndexerMaxBatch = 4;
struct IndexerSeq {
    const float* keys = nullptr;
    int row = 0;
    int n = 0;
    int64_t start = 0;
    const int32_t* start_at = nullptr;
    int count = 0;
};
void indexer_batch(const float* q, const float* w, float* scores, int32_t* selected, int32_t* selected_count,
                   const IndexerSeq* seqs, int count, int heads, int head_dim, int ratio, int stride, int k,
                   void* stream, IndexerMath math = IndexerMath::fp32);

// fp32 dots summed in another order than the CPU. The selection itself is exact: the device
// test feeds both sides the same scores and requires identical index lists. Scores measured up
// to 8e-14 (max relative error 3.4e-7) on the H200, 2026-11-29.
inline constexpr double indexer_scores_max_nmse = 1e-10;

}  // namespace aff::gpu
