// Which forward pass a tool runs: the GPU model (libaff/gpu/forward.hpp) when this build has
// GPU support, a device is visible and --gpus does not say 0; the CPU reference otherwise.
// Built in every build (CPU-only builds answer "CPU" or refuse --gpus N), so tools include it
// without caring how aff was configured. Device visibility follows CUDA_VISIBLE_DEVICES /
// HIP_VISIBLE_DEVICES through the runtime.
#pragma once

#include "libaff/model/forward.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {

struct BackendOptions {
    int gpus = -1;               // --gpus: -1 = use a GPU when one is visible, 0 = CPU, N = N GPUs
    std::size_t gpu_mib = 0;     // --gpu-mib: device memory cap, 0 = all free memory
};

// A copy of a backend's sequence state at some position, taken by ForwardBackend::snapshot
// and put back by restore (the server's prefix cache keeps these, keyed by the tokens run).
// Only the backend that took it can restore it.
class BackendSnapshot {
public:
    virtual ~BackendSnapshot() = default;
    virtual std::int64_t position() const = 0;
    // Memory the copy holds (host or device), for the cache's budget.
    virtual std::size_t bytes() const = 0;
};

// One sequence on one forward pass.
class ForwardBackend {
public:
    virtual ~ForwardBackend() = default;
    // Picks and builds the backend; `cpu` must outlive it. model_path is the checkpoint
    // directory or .aff container `cpu` was loaded from (empty: none): the GPU model reads the
    // bytes of weights it keeps as stored (dense FP8) from it; quantised routed experts come
    // from the model's own expert source. Throws usage for --gpus N in a build without GPU
    // support, device when fewer GPUs are visible than asked for or the model does not fit.
    static std::unique_ptr<ForwardBackend> open(const Model& cpu, const std::string& model_path,
                                                const BackendOptions& options, const ForwardOptions& forward);

    virtual bool on_gpu() const = 0;
    // One line: the device and where each part of the model runs.
    virtual std::string describe() const = 0;
    virtual std::int64_t position() const = 0;
    // Drops the sequence: the next forward starts at position 0.
    virtual void reset() = 0;
    // Model::forward's contract for this backend's sequence.
    virtual std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) = 0;
    // Route traces: `observer` (not owned; null: none) sees the routing of every later
    // forward (model/route_observer.hpp). The CPU reference supports it; the GPU model
    // throws unsupported (its device ring of ids is not written yet).
    virtual void set_route_observer(RouteObserver* observer);

    // Snapshots: whether this backend takes them (both do: the CPU reference copies its
    // state, the GPU model the part of its device state the position uses, to host memory).
    // A restored snapshot continues exactly as the sequence it was taken from would have:
    // forward() after restore gives the logits the same calls give there, bit for bit (the
    // CPU's do not depend on how a prompt is split into calls; the GPU's do: calls of 5+
    // tokens take the prefill GEMMs).
    virtual bool can_snapshot() const { return false; }
    // Throws unsupported where can_snapshot() is false.
    virtual std::unique_ptr<BackendSnapshot> snapshot() const;
    // Replaces the sequence with the snapshot's. Throws usage for a snapshot another kind of
    // backend took, unsupported where can_snapshot() is false.
    virtual void restore(const BackendSnapshot& snapshot);
};

// True when this build was configured with a GPU backend (AFF_GPU not OFF).
bool gpu_support_built();

}  // namespace aff
