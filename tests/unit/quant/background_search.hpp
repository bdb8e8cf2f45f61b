// A BlockSearch whose start() really runs in the background (a thread of its own over
// CpuBlockSearch), as the GPU's does: the CPU tests of aff-quantize's pipeline use it to
// overlap searches with the pool's work without a GPU.
#pragma once

#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/block_search.hpp"

#include <future>
#include <string>

namespace aff::test {

class BackgroundSearch final : public quant::BlockSearch {
public:
    // Its own pool: the caller's is busy while a started search runs.
    BackgroundSearch() : pool_(2), inner_(pool_) {}
    ~BackgroundSearch() override {
        if (running_.valid()) running_.wait();
    }
    std::string describe() const override { return "background " + inner_.describe(); }
    void search(const quant::Codebook& cb, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
                const std::uint32_t* q_index, std::uint16_t* windows) override {
        ++searched;  // CpuBlockSearch's pool is not shared: one search at a time on it
        if (running_.valid()) running_.wait();
        inner_.search(cb, y, blocks, q, q_blocks, q_index, windows);
    }
    void start(const quant::Codebook& cb, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
               const std::uint32_t* q_index, std::uint16_t* windows) override {
        if (running_.valid()) throw_internal("BackgroundSearch: two started searches");
        ++started;
        running_ = std::async(std::launch::async, [=, this] { inner_.search(cb, y, blocks, q, q_blocks, q_index, windows); });
    }
    void wait() override {
        if (running_.valid()) running_.get();
    }
    int started = 0, searched = 0;

private:
    ThreadPool pool_;
    quant::CpuBlockSearch inner_;
    std::future<void> running_;
};

}  // namespace aff::test
