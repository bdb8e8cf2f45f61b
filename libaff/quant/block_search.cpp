// CpuBlockSearch (block_search.hpp); the choice of a GPU search lives in libaff/gpu/block_search_choice.
#include "libaff/quant/block_search.hpp"

#include "libaff/core/error.hpp"

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

}  // namespace aff::quant
