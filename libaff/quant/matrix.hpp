// Whole matrices in the trellis format (formats/quant-codebook.md §4-5): a row of
// `cols` weights is ceil(cols/256) consecutive 92-byte blocks, rows one after another.
// Quantisation runs rows in parallel; each row's bytes depend only on that row, the
// importance vector and the codebook, so the output is identical at any thread count.
// This file is also the CPU reference for decoding: dequantize_row and matvec.
#pragma once

#include "aff/core/thread_pool.hpp"
#include "aff/quant/codebook.hpp"
#include "aff/quant/trellis.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace aff::quant {

// The two storage types of the container's codebook range (formats/quant-codebook.md §2).
constexpr std::uint16_t kTypeTrellis = 0x0100;         // "TQ2875": W as is
constexpr std::uint16_t kTypeTrellisRotated = 0x0101;  // "TQ2875R": W Hᵀ (rotation.hpp)

std::size_t row_bytes(std::size_t cols);
std::size_t matrix_bytes(std::size_t rows, std::size_t cols);

enum class Rotation {
    off,
    on,  // needs a power-of-two cols
    // On without an importance vector (it spreads outliers); with one, whichever of the
    // two gives the smaller importance-weighted error on a sample of rows: unrotated
    // blocks can use the importance per position, rotated ones cannot (matrix.cpp).
    automatic,
};

struct MatrixOptions {
    Rotation rotation = Rotation::automatic;
    EncodeOptions encode;
    // Where the Viterbi searches run: nullptr, each block on the pool's threads
    // (encode_block); else all blocks of a matrix in one batch through `search` (a GPU),
    // the rest on the pool. Both write the same bytes (trellis.hpp, BlockSearch).
    BlockSearch* search = nullptr;
};

// w: rows × cols row-major. importance: per input column (E[x_j²] from an imatrix),
// or empty. out: matrix_bytes(rows, cols). Returns whether the stored rows are rotated
// (storage type kTypeTrellisRotated) or not (kTypeTrellis).
bool quantize_matrix(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                     const MatrixOptions& options, const Codebook& codebook, ThreadPool& pool,
                     std::span<std::uint8_t> out);

// Row r of the original (unrotated) matrix.
void dequantize_row(std::span<const std::uint8_t> row, std::size_t cols, bool rotated, const Codebook& codebook,
                    float* out);

// y = W x for a quantised matrix (x has cols entries, y rows); pool may be nullptr.
void matvec(std::span<const std::uint8_t> data, std::size_t rows, std::size_t cols, bool rotated,
            const Codebook& codebook, const float* x, float* y, ThreadPool* pool = nullptr);
// The same with caller-owned working memory of at least matvec_scratch_floats(cols)
// floats (the padded, possibly rotated copy of x), for callers that run many small
// matrices per token and must not allocate on each (the container expert source).
std::size_t matvec_scratch_floats(std::size_t cols);
void matvec(std::span<const std::uint8_t> data, std::size_t rows, std::size_t cols, bool rotated,
            const Codebook& codebook, const float* x, float* y, std::span<float> scratch, ThreadPool* pool = nullptr);

}  // namespace aff::quant
