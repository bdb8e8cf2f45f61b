// The GPU model (libaff/gpu/forward.hpp) as a Sequence, built by open_sequence in GPU builds
// only (gpu_sequence.cpp compiles to nothing elsewhere). Snapshots are the host copies
// GpuModel::snapshot takes of what the state uses at its position. Rewind's undo record for
// each forward call (undo_log.hpp) is a GpuRewindPoint: the few ranges the call overwrites,
// copied device to device, taken only while the rewind depth is above 0 (0 by default);
// records the log drops are kept and reused (their device buffers with them), so a
// generation with drafts does not allocate device memory per call.
// The GPU's logits depend on how tokens are split into calls (prefill GEMMs from
// GpuOptions::gemm_min_tokens up), so after a rewind into the middle of a call the replayed
// part runs as its own call: the logits are those of a fresh sequence making the same calls.
// Route traces: the observer is the GPU model's (GpuModel::set_route_observer).
// While undo records are kept (rewind depth above 0: the generation loop drafts), every call
// takes the GEMVs (GpuModel::set_gemv_calls), so verify calls of any length round as the
// single steps they stand for.
#pragma once

#if defined(AFF_HAVE_GPU)
#include "libaff/gpu/forward.hpp"
#include "libaff/runtime/dspark_runner.hpp"
#include "libaff/runtime/mtp_runner.hpp"
#include "libaff/runtime/sequence.hpp"

#include <memory>

namespace aff {

// What the GPU drafters need of a GPU sequence: its model, and to hear of each forward call
// right after it, while the model still holds that call's final streams (the MTP runner,
// gpu_mtp_runner.hpp), or with the call's tap features (the DSpark runner, gpu_dspark_runner.hpp).
class GpuTrunk {
public:
    virtual ~GpuTrunk() = default;
    virtual gpu::GpuModel& gpu_model() = 0;
    // Not owned; null: none. Told of every call (calls a rewind replays included).
    virtual void set_call_listener(TrunkCallListener* listener) = 0;
    // Not owned; null: none. While set, the model computes its taps (GpuModel::set_taps) and
    // the listener gets them after every call (calls a rewind replays included).
    virtual void set_tap_listener(TapListener* listener) = 0;
};

std::unique_ptr<Sequence> make_gpu_sequence(const Model& cpu, const TensorReader* weights, const gpu::GpuOptions& options);

}  // namespace aff
#endif
