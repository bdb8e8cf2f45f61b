// The MTP runner (mtp_runner.hpp) of the GPU sequence (gpu_sequence.hpp): GpuModel::mtp_forward
// on an MTP state of its own (GpuModel::new_mtp_state), the stream store in that state's device
// buffer, filled device to device from each trunk call's final streams (GpuModel::keep_streams)
// while the sequence reports the call. A greedy proposal's chain runs on the device, only the
// guesses' ids coming to the host (greedy_chain: GpuModel::mtp_draft_greedy), and so does a
// sampled one's, its guesses drawn on the device from the tempered softmax with the drafter's
// draws, their q rows coming back with the ids (sampled_chain: GpuModel::mtp_draft_sampled).
// Always declared; in a build without GPU support there is no GPU sequence to draft on.
#pragma once

#include "libaff/runtime/mtp_runner.hpp"
#include "libaff/runtime/sequence.hpp"

#include <memory>
#include <string>

namespace aff {

// A runner for `backend` when it is a GPU sequence whose model has its MTP layer on the GPU;
// else null, with the reason in why_not. `backend` must outlive the runner.
std::unique_ptr<MtpRunner> make_gpu_mtp_runner(Sequence& backend, std::string& why_not);

}  // namespace aff
