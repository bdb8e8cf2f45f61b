// The DSpark runner (dspark_runner.hpp) of a GPU sequence (gpu_sequence.hpp): the trunk runs on
// the GPU and computes its tap features there (GpuModel::set_taps), whose means come to the
// host with each call's logits; the stages run on the CPU reference (HostDsparkStages,
// cpu_dspark_runner.hpp). Always declared; in a build without GPU support there is no GPU
// sequence to draft on.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/dspark_runner.hpp"
#include "libaff/runtime/sequence.hpp"

#include <memory>
#include <string>

namespace aff {

// A runner for `backend` when it is a GPU sequence on one GPU and `model` (the one it was built
// from) has DSpark stages; else null, with the reason in why_not. The runner turns the trunk's
// taps on and off again when destroyed. `model` and `backend` must outlive it.
std::unique_ptr<DsparkRunner> make_gpu_dspark_runner(const Model& model, Sequence& backend, std::string& why_not);

}  // namespace aff
