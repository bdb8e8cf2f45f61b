// How the built-in codebook was made: Lloyd iterations of the trellis code on i.i.d.
// N(0,1) blocks (formats/quant-codebook.md §6). Each iteration encodes the training
// blocks with the current entries and moves every entry to the mean of the scaled
// targets that chose it. Deterministic for given options at any thread count.
#pragma once

#include "aff/core/thread_pool.hpp"
#include "aff/quant/codebook.hpp"
#include "aff/quant/trellis.hpp"

#include <cstdint>
#include <functional>

namespace aff::quant {

struct TrainOptions {
    std::uint64_t seed = 1;
    std::uint64_t blocks = 4096;  // training blocks of 256 samples
    int iterations = 10;
    EncodeOptions encode;  // how training blocks are encoded
    // Called after each iteration with its mean squared error per sample.
    std::function<void(int, double)> on_iteration;
};

// The pseudo-random N(0,1) sample `index` of stream `seed` (splitmix64 + Box-Muller),
// the same on every platform; the benchmarks draw their sources from it too.
double gaussian_sample(std::uint64_t seed, std::uint64_t index);

Codebook train_codebook(const TrainOptions& options, ThreadPool& pool, const Codebook* start = nullptr);

}  // namespace aff::quant
