// Where aff-quantize's Viterbi searches run: on a GPU when this build has GPU support and
// one is visible, else on the CPU (quant::CpuBlockSearch). It lives in gpu/ because choosing a
// device is the GPU runtime's business; the quantiser only sees the BlockSearch interface.
// Built in every build, so a CPU-only build answers the flag too.
#pragma once

#include "libaff/quant/trellis.hpp"

#include <memory>

namespace aff::gpu {

// The GPU search for --gpus N, with aff-run's meaning of N: -1 a GPU when one is visible,
// 0 none; nullptr means "search on the CPU" (quant::MatrixOptions::search). N = 1 needs a
// visible GPU (device error otherwise); N > 1 is refused (the search runs on one GPU so far);
// a build without GPU support refuses N > 0 (usage error).
std::unique_ptr<quant::BlockSearch> open_block_search(int gpus);

}  // namespace aff::gpu
