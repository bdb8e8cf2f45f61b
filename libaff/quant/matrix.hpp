// Whole matrices in the trellis format (formats/quant-codebook.md §4-5): a row of
// `cols` weights is ceil(cols/256) consecutive 92-byte blocks, rows one after another.
// Quantisation runs rows in parallel; each row's bytes depend only on that row, the
// importance vector and the codebook, so the output is identical at any thread count.
// This file is also the CPU reference for decoding: dequantize_row and matvec.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/trellis.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
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

// Σ(w − ŵ)² and Σw² over a quantised matrix, ŵ what its stored bytes decode to; summed per
// row, then rows in order, so the same at any thread count. Rotated rows are measured in
// the rotated basis (the rotation is orthonormal: the same sums up to float rounding), which
// spares the inverse transform.
struct MatrixError {
    double error = 0, reference = 0;
};

// w: rows × cols row-major. importance: per input column (E[x_j²] from an imatrix),
// or empty. out: matrix_bytes(rows, cols). Returns whether the stored rows are rotated
// (storage type kTypeTrellisRotated) or not (kTypeTrellis). error: when not null, the
// matrix's error, measured while its rows are still in cache.
bool quantize_matrix(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                     const MatrixOptions& options, const Codebook& codebook, ThreadPool& pool,
                     std::span<std::uint8_t> out, MatrixError* error = nullptr);

// quantize_matrix with a BlockSearch, in stages, so that a caller can run one matrix's
// searches while its threads prepare and finish others (aff-quantize's pipeline,
// quantize_model.cpp). quantize_matrix is prepare, start, finish on one encoder: the bytes
// are the same. The encoder keeps its working memory (about 10 bytes a weight) from one
// matrix to the next.
class MatrixEncoder {
public:
    MatrixEncoder();
    ~MatrixEncoder();  // waits for a search still under way
    MatrixEncoder(const MatrixEncoder&) = delete;
    MatrixEncoder& operator=(const MatrixEncoder&) = delete;

    // Everything before the first search pass: the checks, the rotation choice (its sample
    // searches run at once through options.search), the rotated rows, the block states and
    // the targets. options.search must be set and outlive finish(); w and importance need
    // not outlive this call.
    void prepare(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                 const MatrixOptions& options, const Codebook& codebook, ThreadPool& pool);
    // Begins the first pass's searches (BlockSearch::start; one started search at a time).
    void start();
    // Waits for them (no-op when there is nothing to wait for).
    void wait();
    // Waits, runs any further passes at once, writes out (matrix_bytes(rows, cols)) and
    // returns whether the rows are rotated; error as for quantize_matrix.
    bool finish(ThreadPool& pool, std::span<std::uint8_t> out, MatrixError* error = nullptr);

    struct Work;

private:
    std::unique_ptr<Work> work_;
    bool rotated_ = false;
};

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
