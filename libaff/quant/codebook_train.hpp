// How the built-in codebook was made: Lloyd iterations of the trellis code on i.i.d.
// N(0,1) blocks (formats/quant-codebook.md §6). Each iteration encodes the training
// blocks with the current entries and moves every entry to the mean of the scaled
// targets that chose it. Deterministic for given options at any thread count.
// With a sign structure (formats/quant-codebook.md §3.1) the table is a function of a
// base table of 4096 >> m entries, and each base entry moves to the mean of the
// targets of all its windows, each taken back through its window's sign flips (and
// swap), so the result satisfies the structure exactly.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/trellis.hpp"

#include <cstdint>
#include <functional>

namespace aff::quant {

struct TrainOptions {
    std::uint64_t seed = 1;
    std::uint64_t blocks = 4096;  // training blocks of 256 samples
    int iterations = 10;
    EncodeOptions encode;  // how training blocks are encoded
    // Sign-structure shift m: 0 (none), 2 (bits 0/1 of a window flip the signs of c0/c1)
    // or 3 (bit 2 also swaps c0 and c1, before the flips). Other values throw.
    int structure = 0;
    // Called after each iteration with its mean squared error per sample.
    std::function<void(int, double)> on_iteration;
};

// The pseudo-random N(0,1) sample `index` of stream `seed` (splitmix64 + Box-Muller),
// the same on every platform; the benchmarks draw their sources from it too.
double gaussian_sample(std::uint64_t seed, std::uint64_t index);

// `start` (when given) is the first table, otherwise random N(0,1) entries; with a
// structure, its base entries (index w & ~(2^m − 1)) are kept and the rest derived.
Codebook train_codebook(const TrainOptions& options, ThreadPool& pool, const Codebook* start = nullptr);

}  // namespace aff::quant
