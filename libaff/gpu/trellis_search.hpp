// The trellis encoder's Viterbi search on a GPU (quant::BlockSearch): aff-quantize's routed
// experts are searched by kernels/trellis_encode.hip, everything else of the encoding stays
// on the host (libaff/quant/matrix.cpp), so the container's bytes are those of the CPU
// encoder. GPU builds only; libaff/quant/block_search.hpp picks it for the tools.
#pragma once

#include "libaff/quant/trellis.hpp"

#include <memory>

namespace aff::gpu {

// The search on visible device `ordinal` (use_device checks it). Throws a device error when
// the device cannot be used. blocks_per_sm: the kernel's occupancy (trellis_encode.hpp).
std::unique_ptr<quant::BlockSearch> open_trellis_search(int ordinal, int blocks_per_sm = 2);

}  // namespace aff::gpu
