// CpuBlockSearch and the choice of the search's device (block_search.hpp).
#include "aff/quant/block_search.hpp"

#include "aff/core/error.hpp"

#if defined(AFF_HAVE_GPU)
#include "aff/gpu/device.hpp"
#include "aff/gpu/trellis_search.hpp"
#endif

#include <string>

namespace aff::quant {

std::string CpuBlockSearch::describe() const { return "CPU (" + std::to_string(pool_.size()) + " threads)"; }

void CpuBlockSearch::search(const Codebook& cb, const float* y, std::size_t blocks, const float* q,
                            std::size_t q_blocks, const std::uint32_t* q_index, std::uint16_t* windows) {
    for (std::size_t i = 0; i < blocks; ++i)
        if (q_index[i] >= q_blocks) throw_internal("CpuBlockSearch: a block's weight index is out of range");
    pool_.parallel_for(blocks, [&](std::size_t begin, std::size_t end) {
        TrellisScratch scratch;
        for (std::size_t i = begin; i < end; ++i)
            search_block(y + i * kBlockWeights, q + q_index[i] * kBlockWeights, cb, scratch,
                         windows + i * kBlockSteps);
    });
}

std::unique_ptr<BlockSearch> open_block_search(int gpus) {
    if (gpus == 0) return nullptr;
#if defined(AFF_HAVE_GPU)
    if (gpus < 0 && gpu::device_count() == 0) return nullptr;
    if (gpus > 1)
        throw_unsupported("--gpus " + std::to_string(gpus) + ": the quantiser's search runs on one GPU so far");
    return gpu::open_trellis_search(gpu::select_devices(1).at(0));
#else
    if (gpus > 0)
        throw_usage("--gpus " + std::to_string(gpus) +
                    ": this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
    return nullptr;
#endif
}

}  // namespace aff::quant
