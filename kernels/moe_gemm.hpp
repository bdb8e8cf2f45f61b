// Routed experts for prefill on the GPU: the chunk's (token, slot) jobs are grouped by expert
// on the device (moe_group: no host round trip, so the step can be captured in a graph), then
// each expert's TQ2875 weights (formats/quant-codebook.md) are decoded tile by tile into shared
// memory as bf16 and multiplied by its tokens' activations on the tensor cores (moe_gemm). The
// decode path (1–4 tokens) stays moe_gemv. Host-callable declarations only; device code in
// moe_gemm.hip, CPU twin in libaff/gpu/reference/gemm.hpp, speed in tests/bench/prefill_bench.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aff::gpu {

inline constexpr int kMoeGemmTileM = 64;        // jobs a tile
inline constexpr int kMoeGemmMaxExperts = 1024;

// Device scratch moe_group fills and moe_gemm reads, for `jobs` jobs over `experts` experts:
// counts, per-expert starts, the jobs sorted by expert and the tile list (at most
// jobs / 64 + experts tiles, each one expert's next ≤ 64 jobs). Bytes, 16-byte multiple.
std::size_t moe_group_bytes(int jobs, int experts);

// ids [jobs] (device, int32, each in [0, experts)): job j's expert (jobs = tokens · k, j = t·k +
// slot as router_topk writes them). Fills `scratch` (moe_group_bytes). One block; the order of
// jobs inside an expert's group may differ from run to run, which changes no output value.
void moe_group(const int32_t* ids, int jobs, int experts, void* scratch, void* stream);
// Where moe_group writes each expert's job count in `scratch` ([experts] int32, device): what
// the step before the GEMMs reads (kernels/expert_stage.hpp), queued after moe_group.
const int32_t* moe_group_counts(const void* scratch);

// For every job j: y[j][r] = Σ_c bf16(Ŵ_e[r][c]) · bf16(x[j / x_group][c]), r < n, c < k, where
// e = ids[j] and Ŵ_e is expert e's TQ2875 matrix (decoded exactly as aff::quant::decode_block,
// then rounded to bf16), stored at experts[e] + offset (the expert table, `experts` addresses
// in device memory, each of device memory or mapped pinned host memory, as moe_gemv_routed
// takes it; n rows of k/256 92-byte blocks, 4-byte aligned). x rows are k floats apart
// (16-byte aligned), y rows n floats apart. codebook: device copy of the 4096 × 2 fp16 values.
// Needs k % 256 == 0, n % 128 == 0, 1 <= experts <= 1024; scratch from moe_group for the same
// jobs and experts.
void moe_gemm(const uint8_t* const* experts, std::size_t offset, int n, int k, const void* scratch, int jobs,
              int experts_count, const float* x, int x_group, float* y, const uint16_t* codebook, void* stream);
bool moe_gemm_takes(int n, int k, int experts);

// Against the twin, which rounds weights and x to bf16 the same way and sums in double: only
// the fp32 accumulation order differs.
inline constexpr double moe_gemm_max_nmse = 1e-9;
// Against the exact product (fp32 weights and x, as moe_gemv computes it): two bf16 roundings
// (weights and x, each relative error up to 2^-9, RMS 2^-9/√3) give an NMSE about 2.5e-6; bound 1e-5.
inline constexpr double moe_gemm_max_nmse_vs_exact = 1e-5;

}  // namespace aff::gpu
