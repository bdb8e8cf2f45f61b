// Codebook-expert GEMV for decode (batch 1–4) on the GPU: routed-expert weights stored as
// TQ2875 blocks (formats/quant-codebook.md: 92 bytes per 256 weights, 12-bit sliding window
// over the index bits, 4096 fp16 entry pairs, bf16 block scale), decoded in registers with
// the codebook in shared memory. One launch runs several experts (a token's k = 6 routed
// experts) of the same shape, each with its own weights, input and output. Activations and
// outputs are fp32. For TQ2875R tensors the caller rotates x first (H x, §5); this kernel
// only multiplies by the stored matrix. Host-callable declarations only; device code in
// moe_gemv.hip, CPU twin in libaff/gpu/reference/, speed in tests/bench/moe_gemv_bench.
#pragma once

#include <cstdint>

namespace aff::gpu {

inline constexpr int kMoeGemvMaxBatch = 4;
inline constexpr int kMoeGemvMaxJobs = 16;  // experts per launch (6 routed + room to spare)

// One expert's product: y[b][r] = Σ_c Ŵ[r][c] · x[b][c]. w: n rows of k/256 blocks of 92
// bytes, 16-byte aligned; x [batch][k]; y [batch][n]; all device memory.
struct MoeGemvJob {
    const uint8_t* w = nullptr;
    const float* x = nullptr;
    float* y = nullptr;
};

// How the launch is shaped. target_blocks: thread blocks in the grid (each holds the codebook
// in shared memory and walks its share of the rows of every job, so fewer blocks load the
// 16 KiB codebook fewer times); 264 = 2 per multiprocessor of the H200. dependent_launch
// (NVIDIA sm_90+; a plain launch elsewhere): the kernel may start while the previous kernel
// in the stream still runs and loads weights and codebook before waiting for it, so those must
// not be written by the kernels just before; x is read and y written only after the wait.
struct MoeGemvTuning {
    int target_blocks = 264;
    bool dependent_launch = true;
};
// Measured on the H200 (2026-11-29, tests/bench/RESULTS.md): 264 blocks with the dependent
// launch is best for 6 experts a launch (16 % / 8 % of the read ceiling at batch 1 / 4); one
// expert a launch is faster without the dependent launch.
inline constexpr MoeGemvTuning kMoeGemvDefault{};

// Runs `count` (1..kMoeGemvMaxJobs) jobs of the same n × k in one launch. codebook: device
// copy of the 4096 × 2 fp16 values (Codebook::fp16_values(), 16 KiB). Needs k % 1024 == 0,
// k <= 4096, n even, 1 <= batch <= 4 (throws unsupported otherwise). Jobs is a host array.
void moe_gemv(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook, void* stream);
void moe_gemv_tuned(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook,
                    const MoeGemvTuning& tuning, void* stream);

// Graph replay (libaff/gpu/forward.cpp): the same products with the job list in device memory
// (count jobs, any number), written by an earlier kernel on the stream (kernels/moe_jobs.hpp
// builds it from the router's choice), so one captured launch multiplies whichever experts are
// picked when it runs. The kernel reads the list after waiting for its prerequisites.
void moe_gemv_device_jobs(const MoeGemvJob* jobs, int count, int n, int k, int batch, const uint16_t* codebook,
                          void* stream);

// Dequantises rows × k weights (same layout and limits) into out [rows][k] fp32 with the
// kernel's own window decoder: bit-identical to aff::quant::decode_block (format §7).
void tq2875_dequantize(const uint8_t* w, int rows, int k, const uint16_t* codebook, float* out, void* stream);

// Same products as the twin; the kernel sums c·x per block in fp32 and scales once per block,
// the twin sums decoded weights times x in double.
inline constexpr double moe_gemv_max_nmse = 1e-9;

}  // namespace aff::gpu
