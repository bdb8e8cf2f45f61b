// Matrix quantisation and the CPU reference decoder (matrix.hpp).
#include "aff/quant/matrix.hpp"

#include "aff/core/error.hpp"
#include "aff/quant/rotation.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace aff::quant {

std::size_t row_bytes(std::size_t cols) { return (cols + kBlockWeights - 1) / kBlockWeights * kBlockBytes; }
std::size_t matrix_bytes(std::size_t rows, std::size_t cols) { return rows * row_bytes(cols); }

namespace {

// Encodes rows [begin, end) of w into out (row r at out[(r - first_out_row) · stride]).
void encode_rows(std::span<const float> w, std::size_t cols, std::size_t begin, std::size_t end, bool rotate,
                 const std::vector<float>& q, const EncodeOptions& encode, const Codebook& cb, std::uint8_t* out,
                 std::size_t first_out_row) {
    const std::size_t blocks = q.size() / kBlockWeights, stride = row_bytes(cols);
    TrellisScratch scratch;
    std::vector<float> row(q.size(), 0.0f);
    for (std::size_t r = begin; r < end; ++r) {
        std::copy_n(&w[r * cols], cols, row.begin());
        if (rotate) quant::rotate(row.data(), cols);
        with_context("row " + std::to_string(r), [&] {
            for (std::size_t b = 0; b < blocks; ++b)
                encode_block(&row[b * kBlockWeights], &q[b * kBlockWeights], cb, scratch,
                             out + (r - first_out_row) * stride + b * kBlockBytes, encode);
        });
    }
}

// The same bytes with the searches batched: every block of the matrix goes through
// encode_block's steps (trellis.hpp), the searches of each pass through `search` at once.
void encode_rows_batched(std::span<const float> w, std::size_t rows, std::size_t cols, bool rotate,
                         const std::vector<float>& q, const EncodeOptions& encode, BlockSearch& search,
                         const Codebook& cb, ThreadPool& pool, std::uint8_t* out) {
    const std::size_t per_row = q.size() / kBlockWeights, blocks = rows * per_row, stride = row_bytes(cols);
    // Working memory kept by the calling thread from one matrix to the next (about 80 MiB
    // for an expert matrix): fresh pages for every matrix cost more than filling them.
    // (Named through references: the pool's threads must see the caller's copies. Plain
    // references, not a structured binding: clang before 16 cannot capture those in lambdas.)
    struct Work {
        std::vector<float> x, y;
        std::vector<BlockEncoding> state;
        std::vector<std::uint32_t> due, q_index;
        std::vector<std::uint16_t> windows;
    };
    thread_local Work work;
    std::vector<float>& x = work.x;
    std::vector<float>& y = work.y;
    std::vector<BlockEncoding>& state = work.state;
    std::vector<std::uint32_t>& due = work.due;
    std::vector<std::uint32_t>& q_index = work.q_index;
    std::vector<std::uint16_t>& windows = work.windows;
    x.assign(blocks * kBlockWeights, 0.0f);  // the padded (rotated) rows
    state.resize(blocks);
    pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
            float* row = &x[r * per_row * kBlockWeights];
            std::copy_n(&w[r * cols], cols, row);
            if (rotate) quant::rotate(row, cols);
            with_context("row " + std::to_string(r), [&] {
                for (std::size_t b = 0; b < per_row; ++b)
                    encode_begin(&row[b * kBlockWeights], &q[b * kBlockWeights], state[r * per_row + b]);
            });
        }
    });
    for (;;) {  // one search pass of every block that is due one
        due.clear();
        for (std::size_t i = 0; i < blocks; ++i)
            if (state[i].searching) due.push_back(static_cast<std::uint32_t>(i));
        if (due.empty()) break;
        y.resize(due.size() * kBlockWeights);
        q_index.resize(due.size());
        windows.resize(due.size() * kBlockSteps);
        pool.parallel_for(due.size(), [&](std::size_t begin, std::size_t end) {
            for (std::size_t k = begin; k < end; ++k) {
                encode_targets(&x[due[k] * kBlockWeights], state[due[k]], &y[k * kBlockWeights]);
                q_index[k] = static_cast<std::uint32_t>(due[k] % per_row);
            }
        });
        search.search(cb, y.data(), due.size(), q.data(), per_row, q_index.data(), windows.data());
        pool.parallel_for(due.size(), [&](std::size_t begin, std::size_t end) {
            for (std::size_t k = begin; k < end; ++k) {
                const std::size_t i = due[k];
                encode_searched(&x[i * kBlockWeights], &q[(i % per_row) * kBlockWeights], cb,
                                &windows[k * kBlockSteps], state[i], encode);
            }
        });
    }
    pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r)
            with_context("row " + std::to_string(r), [&] {
                for (std::size_t b = 0; b < per_row; ++b)
                    encode_finish(state[r * per_row + b], out + r * stride + b * kBlockBytes);
            });
    });
}

// Encodes every row of w (rows × cols) into out, on the pool or through options.search.
void encode_matrix(std::span<const float> w, std::size_t rows, std::size_t cols, bool rotate,
                   const std::vector<float>& q, const MatrixOptions& options, const Codebook& cb, ThreadPool& pool,
                   std::uint8_t* out) {
    if (options.search) {
        encode_rows_batched(w, rows, cols, rotate, q, options.encode, *options.search, cb, pool, out);
        return;
    }
    pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
        encode_rows(w, cols, begin, end, rotate, q, options.encode, cb, out + begin * row_bytes(cols), begin);
    });
}

// Per padded position: the importance (1 without one), 0 past the end of the row so
// padding is free. In the rotated basis a diagonal importance D becomes H D Hᵀ, whose
// diagonal is mean(D): per-position weights carry nothing there, so they are flat.
std::vector<float> position_weights(std::size_t cols, std::span<const float> importance, bool rotate) {
    std::vector<float> q((cols + kBlockWeights - 1) / kBlockWeights * kBlockWeights, 0.0f);
    for (std::size_t j = 0; j < cols; ++j) q[j] = (importance.empty() || rotate) ? 1.0f : importance[j];
    return q;
}

// Importance-weighted squared error of quantising sample rows both ways; true when
// rotation wins (ties go to rotation).
bool rotation_wins(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                   const MatrixOptions& options, const Codebook& cb, ThreadPool& pool) {
    constexpr std::size_t kSampleRows = 16;
    const std::size_t n = std::min(rows, kSampleRows);
    std::vector<float> sample(n * cols);
    for (std::size_t i = 0; i < n; ++i) std::copy_n(&w[(i * rows / n) * cols], cols, &sample[i * cols]);
    double error[2] = {0, 0};
    for (int rotate = 0; rotate < 2; ++rotate) {
        const auto q = position_weights(cols, importance, rotate);
        std::vector<std::uint8_t> bytes(matrix_bytes(n, cols));
        encode_matrix(sample, n, cols, rotate, q, options, cb, pool, bytes.data());
        std::vector<double> row_error(n, 0.0);
        pool.parallel_for(n, [&](std::size_t begin, std::size_t end) {
            std::vector<float> back(cols);
            for (std::size_t i = begin; i < end; ++i) {
                dequantize_row(std::span(bytes).subspan(i * row_bytes(cols), row_bytes(cols)), cols, rotate, cb,
                               back.data());
                for (std::size_t j = 0; j < cols; ++j) {
                    const double d = sample[i * cols + j] - back[j];
                    row_error[i] += importance[j] * d * d;
                }
            }
        });
        for (double e : row_error) error[rotate] += e;  // in row order: independent of threads
    }
    return error[1] <= error[0];
}

}  // namespace

bool quantize_matrix(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                     const MatrixOptions& opt, const Codebook& cb, ThreadPool& pool, std::span<std::uint8_t> out) {
    if (cols == 0 || w.size() != rows * cols) throw_internal("quantize_matrix: weight count does not match the shape");
    if (out.size() != matrix_bytes(rows, cols)) throw_internal("quantize_matrix: output size does not match the shape");
    if (!importance.empty() && importance.size() != cols)
        throw_format("importance has " + std::to_string(importance.size()) + " columns, the matrix " +
                     std::to_string(cols));
    for (std::size_t j = 0; j < importance.size(); ++j)
        if (!(importance[j] >= 0.0f) || !std::isfinite(importance[j]))
            throw_format("importance of column " + std::to_string(j) + " is negative or not finite");
    bool rotate = false;
    switch (opt.rotation) {
    case Rotation::off: break;
    case Rotation::on:
        if (!rotation_supported(cols))
            throw_unsupported("rotation needs a power-of-two column count, not " + std::to_string(cols));
        rotate = true;
        break;
    case Rotation::automatic:
        rotate = rotation_supported(cols) &&
                 (importance.empty() || rotation_wins(w, rows, cols, importance, opt, cb, pool));
        break;
    }
    const auto q = position_weights(cols, importance, rotate);
    encode_matrix(w, rows, cols, rotate, q, opt, cb, pool, out.data());
    return rotate;
}

void dequantize_row(std::span<const std::uint8_t> row, std::size_t cols, bool rotated, const Codebook& cb, float* out) {
    if (row.size() != row_bytes(cols)) throw_internal("dequantize_row: row size does not match cols");
    const std::size_t blocks = row.size() / kBlockBytes;
    float tmp[kBlockWeights];
    for (std::size_t b = 0; b < blocks; ++b) {
        decode_block(&row[b * kBlockBytes], cb, tmp);
        const std::size_t n = std::min<std::size_t>(kBlockWeights, cols - b * kBlockWeights);
        std::copy_n(tmp, n, out + b * kBlockWeights);
    }
    if (rotated) unrotate(out, cols);
}

std::size_t matvec_scratch_floats(std::size_t cols) {
    return (cols + kBlockWeights - 1) / kBlockWeights * kBlockWeights;
}

void matvec(std::span<const std::uint8_t> data, std::size_t rows, std::size_t cols, bool rotated, const Codebook& cb,
            const float* x, float* y, ThreadPool* pool) {
    std::vector<float> scratch(matvec_scratch_floats(cols));
    matvec(data, rows, cols, rotated, cb, x, y, scratch, pool);
}

void matvec(std::span<const std::uint8_t> data, std::size_t rows, std::size_t cols, bool rotated, const Codebook& cb,
            const float* x, float* y, std::span<float> scratch, ThreadPool* pool) {
    if (data.size() != matrix_bytes(rows, cols)) throw_internal("matvec: data size does not match the shape");
    if (scratch.size() < matvec_scratch_floats(cols)) throw_internal("matvec: scratch smaller than the padded row");
    const std::size_t blocks = (cols + kBlockWeights - 1) / kBlockWeights;
    float* xr = scratch.data();
    std::copy_n(x, cols, xr);
    std::fill(xr + cols, xr + blocks * kBlockWeights, 0.0f);
    if (rotated) rotate(xr, cols);
    const std::size_t stride = row_bytes(cols);
    auto body = [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
            float acc = 0.0f;
            for (std::size_t b = 0; b < blocks; ++b)
                acc += dot_block(&data[r * stride + b * kBlockBytes], cb, &xr[b * kBlockWeights]);
            y[r] = acc;
        }
    };
    if (pool) pool->parallel_for(rows, body, 16);
    else body(0, rows);
}

}  // namespace aff::quant
