// Which forward pass a tool runs: the GPU model (libaff/gpu/forward.hpp) when this build has
// GPU support, a device is visible and --gpus does not say 0; the CPU reference otherwise.
// Built in every build (CPU-only builds answer "CPU" or refuse --gpus N), so tools include it
// without caring how aff was configured. Device visibility follows CUDA_VISIBLE_DEVICES /
// HIP_VISIBLE_DEVICES through the runtime.
#pragma once

#include "libaff/placement/policy.hpp"

#include "libaff/model/forward.hpp"
#include "libaff/runtime/sequence.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace aff {

struct BackendOptions {
    int gpus = -1;               // --gpus: -1 = use a GPU when one is visible, 0 = CPU, N = N GPUs
    std::size_t gpu_mib = 0;     // --gpu-mib: device memory cap, 0 = all free memory
    // The expert tiers (libaff/gpu/forward.hpp GpuTierOptions), in MiB; unset: derived.
    std::optional<std::size_t> gpu_expert_mib, gpu_headroom_mib, host_pool_mib;
    std::size_t host_pool_reserve_mib = 1536;
    std::string placement_strategy = "heat";
    // The heat mover's knobs (--placement-moves, -decay, -hysteresis, -min-gain, -lead, -shadow);
    // the GPU mover's defaults (placement::gpu_mover_heat_options: a move stalls the next call).
    placement::HeatOptions heat = placement::gpu_mover_heat_options();
    // --expert-profile: the initial placement's order (busiest first into the GPU slab);
    // empty: the container's own profile section when it has one for this model, else
    // layer-major order.
    std::string expert_profile;
    // --draft-placement: where the MTP layer's routed experts live on the GPU path ("auto",
    // "vram", "ram"; libaff/gpu/forward.hpp DraftPlacement). The CPU reference ignores it.
    std::string draft_placement = "auto";
    // --expert-prefetch: tiered decode's pooled experts a layer copied into VRAM during its
    // attention (libaff/gpu/forward.hpp GpuTierOptions::prefetch_experts); 0 off.
    int expert_prefetch = 1;
};

// Picks and builds the sequence's backend; `cpu` must outlive it. model_path is the checkpoint
// directory or .aff container `cpu` was loaded from (empty: none): the GPU model reads the
// bytes of weights it keeps as stored (dense FP8) from it; quantised routed experts come from
// the model's own expert source. Throws usage for --gpus N in a build without GPU support,
// device when fewer GPUs are visible than asked for or the model does not fit.
std::unique_ptr<Sequence> open_sequence(const Model& cpu, const std::string& model_path, const BackendOptions& options,
                                        const ForwardOptions& forward);

// True when this build was configured with a GPU backend (AFF_GPU not OFF).
bool gpu_support_built();

}  // namespace aff
