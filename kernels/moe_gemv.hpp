// Codebook-expert GEMV for decode (batch 1–4) on the GPU: routed-expert weights stored as
// TQ2875 blocks (formats/quant-codebook.md: 92 bytes per 256 weights, 12-bit sliding window
// over the index bits, 4096 fp16 entry pairs, bf16 block scale), decoded in registers with
// the codebook in shared memory. One launch runs many expert matrices of the same shape, each
// with its own weights, inputs and outputs. Activations and outputs are fp32. For TQ2875R
// tensors the caller rotates x first (H x, §5); this kernel only multiplies by the stored
// matrix. Two entry points: explicit jobs (moe_gemv) and the forward's routed layout
// (moe_gemv_routed: expert ids on the device, every distinct expert decoded once for all the
// tokens that chose it, w1 and w3 in one launch; experts found through a table of addresses
// read at run time, so a captured graph follows an expert that moved). Host-callable
// declarations only; device code in moe_gemv.hip, CPU twin in libaff/gpu/reference/, speed in
// tests/bench/moe_gemv_bench.
#pragma once

#include <cstdint>

namespace aff::gpu {

inline constexpr int kMoeGemvMaxBatch = 4;  // tokens one decoded weight serves
inline constexpr int kMoeGemvMaxJobs = 16;  // explicit jobs per launch
inline constexpr int kMoeGemvMaxPairs = 64; // routed (token, slot) pairs per launch
inline constexpr int kMoeGemvMaxExperts = 256;  // expert-table entries a routed launch reads (V4-Flash: 256)

// One expert's product: y[b][r] = Σ_c Ŵ[r][c] · x[b][c]. w: n rows of k/256 blocks of 92
// bytes, 16-byte aligned; x [batch][k]; y [batch][n]; all device memory.
struct MoeGemvJob {
    const uint8_t* w = nullptr;
    const float* x = nullptr;
    float* y = nullptr;
};

// How the launch is shaped. target_blocks: thread blocks in the grid (each holds the codebook
// in shared memory and walks its share of the work items, so fewer blocks load the 16 KiB
// codebook fewer times); 528 = 4 per multiprocessor of the H200, what fits at once (the
// kernels for 3 or 4 tokens fit 3 per multiprocessor and take 3/4 of target_blocks).
// dependent_launch (NVIDIA sm_90+; a plain launch elsewhere): the kernel may start while the
// previous kernel in the stream still runs; it loads the codebook (and, for explicit jobs,
// the first weights; for the routed layout, the expert table) before waiting for it, so those
// must not be written by the kernels just before; x (and the routed ids) are read and y
// written only after the wait.
// item_rows: rows a warp decodes per work item (4 or 8): the block's activations are read once
// for all of them; 8 needs n % 8 == 0 (one matrix; 4 a matrix with two) and NVIDIA (the stage
// takes 63.5 KiB of shared memory a block, 3 blocks a multiprocessor), else 4 is used. 8 is
// faster for the forward's launches (tests/bench/RESULTS.md, moe_gemv_bench); launches of one
// expert have half the items and can be slower.
struct MoeGemvTuning {
    int target_blocks = 528;
    bool dependent_launch = true;
    int item_rows = 8;
};
inline constexpr MoeGemvTuning kMoeGemvDefault{};

// Runs `count` (1..kMoeGemvMaxJobs) jobs of the same n × k in one launch. codebook: device
// copy of the 4096 × 2 fp16 values (Codebook::fp16_values(), 16 KiB). Needs k % 1024 == 0,
// k <= 4096, n % 4 == 0, 1 <= batch <= 4 (throws unsupported otherwise). Jobs is a host array.
void moe_gemv(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook, void* stream);
void moe_gemv_tuned(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook,
                    const MoeGemvTuning& tuning, void* stream);

// The forward's layout: `tokens` tokens each routed to `top_k` experts; pair j = t·top_k + s
// is token t's s-th expert, ids[j] (device memory, read after the dependent-launch wait).
// Experts are found through the expert table: expert e's extent starts at experts[e]
// (experts_count <= kMoeGemvMaxExperts addresses in device memory, read before the wait: no
// kernel may write the table; the host rewrites it between launches or graph replays, and a
// replay reads whatever it holds then). An address may be device memory or the device address
// of mapped pinned host memory, 16-byte aligned. For each of `matrices` (1 or 2, e.g. w1 and
// w3 of a layer) matrix m: each expert's n × k matrix lies at experts[e] + offset[m] (n · k/256
// · 92 bytes), and pair j's output is y[m] + j · n. Pair j's input is x + t · x_token_stride +
// s · x_slot_stride (floats; slot stride 0 when the token's experts share one input). An
// expert chosen by several tokens is decoded once and multiplied with each of their inputs.
// Needs tokens <= kMoeGemvMaxBatch, tokens · top_k <= kMoeGemvMaxPairs, k as above, n % 4 ==
// 0, offsets % 16 == 0, and no expert twice among one token's pairs (the router picks distinct
// experts). TQ2875R experts (stored as W Hᵀ) need the rotated input H x: with `rotated` set
// (one byte per expert, device memory, non-zero = TQ2875R; only with matrices == 1) a pair
// whose expert is flagged reads x_rotated, at the same offsets, instead of x.
struct MoeGemvRouted {
    const int32_t* ids = nullptr;
    int tokens = 1;
    int top_k = 1;
    int matrices = 1;
    const uint8_t* const* experts = nullptr;
    int experts_count = 0;
    unsigned long long offset[2] = {0, 0};
    float* y[2] = {nullptr, nullptr};
    const float* x = nullptr;
    long long x_token_stride = 0;
    long long x_slot_stride = 0;
    const uint8_t* rotated = nullptr;
    const float* x_rotated = nullptr;
};
void moe_gemv_routed(const MoeGemvRouted& r, int n, int k, const uint16_t* codebook, const MoeGemvTuning& tuning,
                     void* stream);

// Dequantises rows × k weights (same layout and limits) into out [rows][k] fp32 with the
// kernel's own window decoder: bit-identical to aff::quant::decode_block (format §7).
void tq2875_dequantize(const uint8_t* w, int rows, int k, const uint16_t* codebook, float* out, void* stream);

// Same products as the twin; the kernel sums c·x per block in fp32 and scales once per block,
// the twin sums decoded weights times x in double.
inline constexpr double moe_gemv_max_nmse = 1e-9;
}  // namespace aff::gpu
