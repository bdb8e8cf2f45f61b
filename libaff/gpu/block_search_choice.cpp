// open_block_search (block_search_choice.hpp): with GPU support the trellis search on the first
// visible device, without it a refusal of any --gpus above 0.
#include "libaff/gpu/block_search_choice.hpp"

#include "libaff/core/error.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/trellis_search.hpp"
#endif

#include <string>

namespace aff::gpu {

std::unique_ptr<quant::BlockSearch> open_block_search(int gpus) {
    if (gpus == 0) return nullptr;
#if defined(AFF_HAVE_GPU)
    if (gpus < 0 && device_count() == 0) return nullptr;
    if (gpus > 1)
        throw_unsupported("--gpus " + std::to_string(gpus) + ": the quantiser's search runs on one GPU so far");
    return open_trellis_search(select_devices(1).at(0));
#else
    if (gpus > 0)
        throw_usage("--gpus " + std::to_string(gpus) +
                    ": this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
    return nullptr;
#endif
}

}  // namespace aff::gpu
