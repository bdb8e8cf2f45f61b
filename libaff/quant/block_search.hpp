// The CPU's way to run aff-quantize's Viterbi searches (trellis.hpp, BlockSearch): on the
// pool's threads. The GPU's way, and the choice between them, live above in
// libaff/gpu/block_search_choice.hpp. The choice never changes the output bytes, only the time.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/trellis.hpp"

#include <memory>

namespace aff::quant {

// search_block on the pool's threads: the batched path of matrix.cpp without a GPU (its
// tests, and the reference the GPU search is compared with).
class CpuBlockSearch final : public BlockSearch {
public:
    explicit CpuBlockSearch(ThreadPool& pool) : pool_(pool) {}
    std::string describe() const override;
    void search(const Codebook& codebook, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
                const std::uint32_t* q_index, std::uint16_t* windows) override;

private:
    ThreadPool& pool_;
};

}  // namespace aff::quant
