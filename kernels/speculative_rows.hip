// The trunk's sampled picks (contract in speculative_rows.hpp): one block of kDrawThreads
// threads a row. The maximum, then p's total Σw over the candidates (block_draw's running sums,
// whose draw serves plain rows), then for a row with a guess the accept test on that same Σw,
// and only on rejection a second pass for the residual max(0, w/Σw - q).
#include "kernels/speculative_rows.hpp"

#include "kernels/block_draw.hpp"
#include "kernels/check.hpp"

namespace aff::gpu {
namespace {

__global__ void __launch_bounds__(kDrawThreads)
    speculative_kernel(const float* __restrict__ x, int cols, long long stride, float inv_t, const float* __restrict__ u,
                       const int32_t* __restrict__ guess, int guesses, const float* __restrict__ q, long long q_stride,
                       int32_t* out) {
    __shared__ DrawShared sh;
    const int r = static_cast<int>(dev::block_x());
    const int tid = static_cast<int>(dev::thread_x());
    const float* row = x + static_cast<long long>(r) * stride;
    float max;
    int max_id;
    block_row_max(row, cols, sh, max, max_id);
    if (max_id == kNoId || max == -__builtin_huge_valf()) {  // every value NaN or -inf
        if (tid == 0) out[r] = 0;
        return;
    }
    auto w = [&](int i) { return tempered_weight(row[i], max, inv_t); };
    double total = 0.0;
    const int plain = block_draw(w, cols, u[2 * r + 1], sh, &total);
    if (r >= guesses) {
        if (tid == 0) out[r] = plain >= 0 ? plain : max_id;
        return;
    }
    const int g = guess[r];
    const float* qr = q + static_cast<long long>(r) * q_stride;
    const float inv_total = float(1.0 / total);
    const float pg = g < cols ? w(g) * inv_total : 0.0f;
    if (u[2 * r] * qr[g] < pg) {  // accept with min(1, p/q), without the division
        if (tid == 0) out[r] = g;
        return;
    }
    // Rejected: p(g) < q(g), so the residual is 0 at g; where p and q agree to rounding, p less g.
    int id = block_draw([&](int i) { return fmaxf(w(i) * inv_total - qr[i], 0.0f); }, cols, u[2 * r + 1], sh);
    if (id < 0) id = block_draw([&](int i) { return i == g ? 0.0f : w(i); }, cols, u[2 * r + 1], sh);
    if (tid == 0) out[r] = id >= 0 ? id : g;
}

}  // namespace

void speculative_rows(const float* x, int rows, int cols, long long stride, float temperature, const float* u,
                      const int32_t* guess, int guesses, const float* q, long long q_stride, int32_t* out,
                      void* stream) {
    if (rows < 0 || cols < 1 || stride < cols || !(temperature > 0.0f) || guesses < 0 || guesses > rows ||
        (guesses > 0 && (!q || !guess || q_stride < cols)))
        throw_argument("speculative_rows",
                       "rows >= 0, 1 <= cols <= stride, temperature > 0, 0 <= guesses <= rows, q and guess with guesses");
    if (rows == 0) return;
    speculative_kernel<<<dim3(static_cast<unsigned>(rows)), dim3(kDrawThreads), 0,
                         static_cast<hipStream_t>(stream)>>>(x, cols, stride, 1.0f / temperature, u, guess, guesses,
                                                             q, q_stride, out);
    AFF_GPU_CHECK(hipGetLastError());
}

}  // namespace aff::gpu
