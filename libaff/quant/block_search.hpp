// Where aff-quantize's Viterbi searches run (trellis.hpp, BlockSearch): on the CPU
// threads, or on a GPU when this build has GPU support and one is visible. The choice
// never changes the output bytes, only the time.
#pragma once

#include "aff/core/thread_pool.hpp"
#include "aff/quant/trellis.hpp"

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

// The GPU search for --gpus N, with aff-run's meaning of N: -1 a GPU when one is visible,
// 0 none; nullptr means "search on the CPU" (MatrixOptions::search). N = 1 needs a visible
// GPU (device error otherwise); N > 1 is refused (the search runs on one GPU so far);
// a build without GPU support refuses N > 0 (usage error).
std::unique_ptr<BlockSearch> open_block_search(int gpus);

}  // namespace aff::quant
