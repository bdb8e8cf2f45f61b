// The one matrix product of the CPU reference (forward.cpp, dspark_forward.cpp), in one place so
// that every caller splits the work, and so rounds, alike: results independent of the thread count.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/model/ops.hpp"
#include "libaff/model/weights.hpp"

#include <algorithm>
#include <cstddef>

namespace aff {

// Y[t, r] = W[r, :] · X[t, :] for t < n, r < rows: the one matrix product of the model.
// Split over rows so a single token (decode) still uses every thread. ldw: W's row stride (0:
// cols), for a column slab of a wider matrix (a tensor-parallel rank's share, SubLayerShard).
inline void gemm(ThreadPool& pool, const float* W, int rows, int cols, const float* X, int ldx, int n, float* Y, int ldy,
                 int ldw = 0) {
    const std::size_t stride = ldw > 0 ? std::size_t(ldw) : std::size_t(cols);
    const std::size_t min_chunk = std::max<std::size_t>(1, 8192 / std::max<std::size_t>(1, std::size_t(cols) * n));
    pool.parallel_for(
        static_cast<std::size_t>(rows),
        [&](std::size_t r0, std::size_t r1) {
            for (std::size_t r = r0; r < r1; ++r) {
                const float* w = W + r * stride;
                for (int t = 0; t < n; ++t) Y[std::size_t(t) * ldy + r] = ops::dot(w, X + std::size_t(t) * ldx, cols);
            }
        },
        min_chunk);
}

inline void gemm(ThreadPool& pool, const Matrix& W, const float* X, int n, float* Y) {
    gemm(pool, W.w.data(), W.rows, W.cols, X, W.cols, n, Y, W.rows);
}

}  // namespace aff
