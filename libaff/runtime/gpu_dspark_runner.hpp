// The DSpark runners (dspark_runner.hpp) of a GPU sequence (gpu_sequence.hpp): the trunk runs
// on the GPU and computes its tap features there (GpuModel::set_taps), whose means come to the
// host with each call's logits. When the GPU model has the stages on the device
// (GpuModel::has_dspark: one GPU, attention on it, the stages' experts stored as the trunk's),
// the stages, their rings, the block, the heads and the Markov correction run there too
// (forward_dspark.cpp), fed the host taps back (3·D floats a position); else they run on the
// CPU reference (HostDsparkStages, cpu_dspark_runner.hpp), with the reason in the runner's
// stages() line. Where they run changes the drafts' speed, never the output: the verified
// tokens are the GPU trunk's whatever the guesses. Always declared; in a build without GPU
// support there is no GPU sequence to draft on.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/dspark_runner.hpp"
#include "libaff/runtime/sequence.hpp"

#include <memory>
#include <string>

namespace aff {

// Where a GPU sequence's DSpark runner runs the stages: on the device when it can (automatic),
// or on the CPU reference in any case (host: tests compare the two on one trunk).
enum class DsparkStages { automatic, host };

// A runner for `backend` when it is a GPU sequence on one GPU and `model` (the one it was built
// from) has DSpark stages; else null, with the reason in why_not. The stages run on the device
// when the GPU model has them there, else on the CPU (the runner's stages() says which, and
// why); a --draft-placement other than automatic needs them on the device (else null, why_not
// saying so). The runner turns the trunk's taps on and off again when destroyed. `model` and
// `backend` must outlive it.
std::unique_ptr<DsparkRunner> make_gpu_dspark_runner(const Model& model, Sequence& backend, std::string& why_not,
                                                     DsparkStages where = DsparkStages::automatic);

}  // namespace aff
