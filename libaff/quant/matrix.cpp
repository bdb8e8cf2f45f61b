// Matrix quantisation and the CPU reference decoder (matrix.hpp).
#include "libaff/quant/matrix.hpp"

#include "libaff/core/error.hpp"
#include "libaff/quant/rotation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace aff::quant {

std::size_t row_bytes(std::size_t cols) { return (cols + kBlockWeights - 1) / kBlockWeights * kBlockBytes; }
std::size_t matrix_bytes(std::size_t rows, std::size_t cols) { return rows * row_bytes(cols); }

namespace {

constexpr float kMaxQuantisedWeight = 0x1p64f;  // see checked_rotation

// Adds block b's error to e: its decoded bytes against x, the (rotated, padded) row's 256
// weights of which the first n are real.
void add_block_error(const float* x, const std::uint8_t* block, std::size_t n, const Codebook& cb, MatrixError& e) {
    float back[kBlockWeights];
    decode_block(block, cb, back);
    for (std::size_t j = 0; j < n; ++j) {
        const double d = static_cast<double>(x[j]) - back[j];
        e.error += d * d;
        e.reference += static_cast<double>(x[j]) * x[j];
    }
}

std::size_t real_weights(std::size_t cols, std::size_t block) {
    return std::min<std::size_t>(kBlockWeights, cols - block * kBlockWeights);
}

// Per-row errors summed in row order (independent of the thread count).
void sum_rows(const std::vector<MatrixError>& per_row, MatrixError* error) {
    if (!error) return;
    *error = {};
    for (const MatrixError& r : per_row) error->error += r.error, error->reference += r.reference;
}

// Encodes rows [begin, end) of w into out (row r at out[(r - first_out_row) · stride]);
// row_error: when not null, per row of w.
void encode_rows(std::span<const float> w, std::size_t cols, std::size_t begin, std::size_t end, bool rotate,
                 const std::vector<float>& q, const EncodeOptions& encode, const Codebook& cb, std::uint8_t* out,
                 std::size_t first_out_row, MatrixError* row_error) {
    const std::size_t blocks = q.size() / kBlockWeights, stride = row_bytes(cols);
    TrellisScratch scratch;
    std::vector<float> row(q.size(), 0.0f);
    for (std::size_t r = begin; r < end; ++r) {
        std::copy_n(&w[r * cols], cols, row.begin());
        if (rotate) quant::rotate(row.data(), cols);
        std::uint8_t* row_out = out + (r - first_out_row) * stride;
        with_context("row " + std::to_string(r), [&] {
            for (std::size_t b = 0; b < blocks; ++b)
                encode_block(&row[b * kBlockWeights], &q[b * kBlockWeights], cb, scratch, row_out + b * kBlockBytes,
                             encode);
        });
        if (row_error)
            for (std::size_t b = 0; b < blocks; ++b)
                add_block_error(&row[b * kBlockWeights], row_out + b * kBlockBytes, real_weights(cols, b), cb,
                                row_error[r]);
    }
}

}  // namespace

// The batched encoder: every block of the matrix goes through encode_block's steps
// (trellis.hpp), the searches of each pass through a BlockSearch at once. Same bytes as
// encode_rows.
struct MatrixEncoder::Work {
    std::size_t rows = 0, cols = 0, per_row = 0;
    bool rotate = false;
    std::vector<float> q;     // position weights, per_row blocks
    std::vector<float> x, y;  // the padded (rotated) rows; the due blocks' targets
    std::vector<BlockEncoding> state;
    std::vector<std::uint32_t> due, q_index;
    std::vector<std::uint16_t> windows;
    BlockSearch* search = nullptr;
    EncodeOptions encode;
    const Codebook* cb = nullptr;
    bool started = false;  // the first pass's searches were begun (start)
    bool pending = false;  // and not yet waited for

    ~Work() {
        if (pending) try {
                search->wait();
            } catch (...) {  // the error of a search nobody will read
            }
    }

    // Rows in, block states and the first pass's targets out.
    void load(std::span<const float> w, std::size_t rows_, std::size_t cols_, bool rotate_, std::vector<float> q_,
              const MatrixOptions& options, const Codebook& cb_, ThreadPool& pool) {
        if (pending) throw_internal("MatrixEncoder: prepare while its search is under way");
        rows = rows_, cols = cols_, rotate = rotate_, q = std::move(q_);
        search = options.search, encode = options.encode, cb = &cb_;
        started = false;
        per_row = q.size() / kBlockWeights;
        const std::size_t blocks = rows * per_row;
        // resize, not assign: every element is written below, and a fresh fill of a
        // matrix's worth of pages costs more than the work.
        x.resize(blocks * kBlockWeights);
        y.resize(blocks * kBlockWeights);
        state.resize(blocks);
        pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r) {
                float* row = &x[r * per_row * kBlockWeights];
                std::copy_n(&w[r * cols], cols, row);
                std::fill(row + cols, row + per_row * kBlockWeights, 0.0f);
                if (rotate) quant::rotate(row, cols);
                with_context("row " + std::to_string(r), [&] {
                    for (std::size_t b = 0; b < per_row; ++b) {
                        const std::size_t i = r * per_row + b;
                        encode_begin(&row[b * kBlockWeights], &q[b * kBlockWeights], state[i]);
                        // At the block's own place; collect_due moves them together.
                        if (state[i].searching)
                            encode_targets(&row[b * kBlockWeights], state[i], &y[i * kBlockWeights]);
                    }
                });
            }
        });
        collect_due();
        // Targets of the due blocks, in order (a no-op unless some block has nothing to search).
        for (std::size_t k = 0; k < due.size(); ++k)
            if (due[k] != k) std::copy_n(&y[due[k] * kBlockWeights], kBlockWeights, &y[k * kBlockWeights]);
    }

    void collect_due() {
        due.clear();
        for (std::size_t i = 0; i < state.size(); ++i)
            if (state[i].searching) due.push_back(static_cast<std::uint32_t>(i));
        q_index.resize(due.size());
        for (std::size_t k = 0; k < due.size(); ++k) q_index[k] = static_cast<std::uint32_t>(due[k] % per_row);
        windows.resize(due.size() * kBlockSteps);
    }

    void start() {
        if (started) throw_internal("MatrixEncoder: started twice");
        started = true;
        if (due.empty()) return;
        search->start(*cb, y.data(), due.size(), q.data(), per_row, q_index.data(), windows.data());
        pending = true;
    }

    void wait() {
        if (!pending) return;
        pending = false;
        search->wait();
    }

    void searched(ThreadPool& pool) {
        pool.parallel_for(due.size(), [&](std::size_t begin, std::size_t end) {
            for (std::size_t k = begin; k < end; ++k) {
                const std::size_t i = due[k];
                encode_searched(&x[i * kBlockWeights], &q[(i % per_row) * kBlockWeights], *cb,
                                &windows[k * kBlockSteps], state[i], encode);
            }
        });
    }

    void finish(ThreadPool& pool, std::uint8_t* out, MatrixError* error) {
        wait();
        if (!started && !due.empty())  // not begun in the background: search now
            search->search(*cb, y.data(), due.size(), q.data(), per_row, q_index.data(), windows.data());
        started = true;
        if (!due.empty()) searched(pool);
        for (;;) {  // further passes, each searched at once
            collect_due();
            if (due.empty()) break;
            y.resize(due.size() * kBlockWeights);
            pool.parallel_for(due.size(), [&](std::size_t begin, std::size_t end) {
                for (std::size_t k = begin; k < end; ++k)
                    encode_targets(&x[due[k] * kBlockWeights], state[due[k]], &y[k * kBlockWeights]);
            });
            search->search(*cb, y.data(), due.size(), q.data(), per_row, q_index.data(), windows.data());
            searched(pool);
        }
        const std::size_t stride = row_bytes(cols);
        std::vector<MatrixError> per_row_error(error ? rows : 0);
        pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r)
                with_context("row " + std::to_string(r), [&] {
                    for (std::size_t b = 0; b < per_row; ++b) {
                        std::uint8_t* block = out + r * stride + b * kBlockBytes;
                        encode_finish(state[r * per_row + b], block);
                        if (error)
                            add_block_error(&x[(r * per_row + b) * kBlockWeights], block, real_weights(cols, b), *cb,
                                            per_row_error[r]);
                    }
                });
        });
        sum_rows(per_row_error, error);
    }
};

namespace {

// Encodes every row of w (rows × cols) into out, on the pool or through options.search.
void encode_matrix(std::span<const float> w, std::size_t rows, std::size_t cols, bool rotate,
                   const std::vector<float>& q, const MatrixOptions& options, const Codebook& cb, ThreadPool& pool,
                   std::uint8_t* out, MatrixError* error) {
    if (options.search) {
        // Working memory kept by the calling thread from one matrix to the next (about 80 MiB
        // for an expert matrix): fresh pages for every matrix cost more than filling them.
        thread_local MatrixEncoder::Work work;
        work.load(w, rows, cols, rotate, q, options, cb, pool);
        work.finish(pool, out, error);  // searches at once
        return;
    }
    std::vector<MatrixError> per_row(error ? rows : 0);
    pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
        encode_rows(w, cols, begin, end, rotate, q, options.encode, cb, out + begin * row_bytes(cols), begin,
                    error ? per_row.data() : nullptr);
    });
    sum_rows(per_row, error);
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
// rotation wins (ties go to rotation). The sample's searches run at once (a MatrixEncoder
// may have a search under way meanwhile).
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
        if (options.search) {
            MatrixEncoder::Work work;  // its own: not the caller's thread_local one
            work.load(sample, n, cols, rotate, q, options, cb, pool);
            work.finish(pool, bytes.data(), nullptr);  // searches at once
        } else {
            encode_matrix(sample, n, cols, rotate, q, options, cb, pool, bytes.data(), nullptr);
        }
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

// The checks of quantize_matrix's inputs, then the rotation it stores.
bool checked_rotation(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                      const MatrixOptions& opt, const Codebook& cb, ThreadPool& pool, std::size_t out_size) {
    if (cols == 0 || w.size() != rows * cols) throw_internal("quantize_matrix: weight count does not match the shape");
    if (out_size != matrix_bytes(rows, cols)) throw_internal("quantize_matrix: output size does not match the shape");
    if (!importance.empty() && importance.size() != cols)
        throw_format("importance has " + std::to_string(importance.size()) + " columns, the matrix " +
                     std::to_string(cols));
    for (std::size_t j = 0; j < importance.size(); ++j)
        if (!(importance[j] >= 0.0f) || !std::isfinite(importance[j]))
            throw_format("importance of column " + std::to_string(j) + " is negative or not finite");
    // Checked here, where row and column are known, rather than deep in a block search:
    // a NaN or infinity is no weight, and past 2^64 the rotation's sums (in float)
    // would overflow although the value itself is finite.
    for (std::size_t i = 0; i < w.size(); ++i) {
        const float x = w[i];
        if (std::isfinite(x) && std::fabs(x) <= kMaxQuantisedWeight) continue;
        const std::string where = "weight at row " + std::to_string(i / cols) + ", column " + std::to_string(i % cols);
        if (!std::isfinite(x)) throw_format(where + " is " + (std::isnan(x) ? "NaN" : "infinite"));
        char value[32];
        std::snprintf(value, sizeof value, "%g", static_cast<double>(x));
        throw_format(where + " is " + value + ", beyond the +-2^64 the quantiser takes");
    }
    switch (opt.rotation) {
    case Rotation::off: return false;
    case Rotation::on:
        if (!rotation_supported(cols))
            throw_unsupported("rotation needs a power-of-two column count, not " + std::to_string(cols));
        return true;
    case Rotation::automatic: break;
    }
    return rotation_supported(cols) && (importance.empty() || rotation_wins(w, rows, cols, importance, opt, cb, pool));
}

}  // namespace

bool quantize_matrix(std::span<const float> w, std::size_t rows, std::size_t cols, std::span<const float> importance,
                     const MatrixOptions& opt, const Codebook& cb, ThreadPool& pool, std::span<std::uint8_t> out,
                     MatrixError* error) {
    const bool rotate = checked_rotation(w, rows, cols, importance, opt, cb, pool, out.size());
    encode_matrix(w, rows, cols, rotate, position_weights(cols, importance, rotate), opt, cb, pool, out.data(), error);
    return rotate;
}

MatrixEncoder::MatrixEncoder() : work_(std::make_unique<Work>()) {}
MatrixEncoder::~MatrixEncoder() = default;

void MatrixEncoder::prepare(std::span<const float> w, std::size_t rows, std::size_t cols,
                            std::span<const float> importance, const MatrixOptions& opt, const Codebook& cb,
                            ThreadPool& pool) {
    if (!opt.search) throw_internal("MatrixEncoder needs a BlockSearch");
    if (work_->pending) throw_internal("MatrixEncoder: prepare while its search is under way");
    rotated_ = checked_rotation(w, rows, cols, importance, opt, cb, pool, matrix_bytes(rows, cols));
    work_->load(w, rows, cols, rotated_, position_weights(cols, importance, rotated_), opt, cb, pool);
}

void MatrixEncoder::start() { work_->start(); }
void MatrixEncoder::wait() { work_->wait(); }

bool MatrixEncoder::finish(ThreadPool& pool, std::span<std::uint8_t> out, MatrixError* error) {
    if (out.size() != matrix_bytes(work_->rows, work_->cols))
        throw_internal("MatrixEncoder: output size does not match the shape");
    work_->finish(pool, out.data(), error);
    return rotated_;
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
    // Each row sums its blocks in order; rows go four at a time (dot_block4), the same sums.
    auto weights_of = [&](std::size_t b) {
        return static_cast<int>(std::min<std::size_t>(kBlockWeights, cols - b * kBlockWeights));
    };
    auto body = [&](std::size_t begin, std::size_t end) {
        std::size_t r = begin;
        for (; r + 4 <= end; r += 4) {
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, dots[4];
            for (std::size_t b = 0; b < blocks; ++b) {
                const std::uint8_t* rows4[4];
                for (int i = 0; i < 4; ++i) rows4[i] = &data[(r + i) * stride + b * kBlockBytes];
                dot_block4(rows4, cb, &xr[b * kBlockWeights], weights_of(b), dots);
                for (int i = 0; i < 4; ++i) acc[i] += dots[i];
            }
            for (int i = 0; i < 4; ++i) y[r + i] = acc[i];
        }
        for (; r < end; ++r) {
            float acc = 0.0f;
            for (std::size_t b = 0; b < blocks; ++b)
                acc += dot_block(&data[r * stride + b * kBlockBytes], cb, &xr[b * kBlockWeights], weights_of(b));
            y[r] = acc;
        }
    };
    if (pool) pool->parallel_for(rows, body, 16);
    else body(0, rows);
}

}  // namespace aff::quant
