// CPU twins of the prefill GEMMs (see gemm.hpp): round inputs to bf16 as the kernels do,
// multiply and sum in double.
#include "libaff/gpu/reference/gemm.hpp"

#include "libaff/core/error.hpp"
#include "libaff/gpu/reference/dense_gemv.hpp"
#include "libaff/gpu/reference/fp8_gemv.hpp"
#include "libaff/quant/trellis.hpp"

#include <cstddef>
#include <vector>

namespace aff::cpu {

namespace {
// float → nearest bf16 (ties to even), as a float: what the kernels put in shared memory.
float bf16_round(float v) { return bf16_to_float(float_to_bf16(v)); }

// y[i][r] = Σ_c w[r][c] · x[i][c] over already-rounded rows, in double.
void rows_times(const std::vector<float>& row, int r, int n, int k, const std::vector<float>& xr, int m, float* y) {
    for (int i = 0; i < m; ++i) {
        const float* xi = xr.data() + static_cast<std::size_t>(i) * k;
        double acc = 0.0;
        for (int c = 0; c < k; ++c) acc += static_cast<double>(row[c]) * xi[c];
        y[static_cast<std::size_t>(i) * n + r] = static_cast<float>(acc);
    }
}
std::vector<float> rounded(const float* x, std::size_t count) {
    std::vector<float> v(x, x + count);
    for (float& f : v) f = bf16_round(f);
    return v;
}
}  // namespace

void fp8_gemm(const uint8_t* w, const uint8_t* scales, int n, int k, const float* x, int m, float* y) {
    if (n <= 0 || k <= 0 || k % 128 != 0 || m < 1) aff::throw_format("fp8_gemm twin: bad shape");
    const std::vector<float> xr = rounded(x, static_cast<std::size_t>(m) * k);
    std::vector<float> row(static_cast<std::size_t>(k));
    for (int r = 0; r < n; ++r) {
        for (int c = 0; c < k; ++c)
            row[c] = e4m3_to_float(w[static_cast<std::size_t>(r) * k + c]) *
                     e8m0_to_float(scales[static_cast<std::size_t>(r / 128) * (k / 128) + c / 128]);
        rows_times(row, r, n, k, xr, m, y);
    }
}

void moe_gemm(const uint8_t* w, int n, int k, const aff::quant::Codebook& codebook, const float* x, int m, float* y) {
    if (n <= 0 || k <= 0 || k % aff::quant::kBlockWeights != 0 || m < 1)
        aff::throw_format("moe_gemm twin: n and m must be positive and k a multiple of 256");
    const int blocks = k / aff::quant::kBlockWeights;
    const std::vector<float> xr = rounded(x, static_cast<std::size_t>(m) * k);
    std::vector<float> row(static_cast<std::size_t>(k));
    for (int r = 0; r < n; ++r) {
        for (int b = 0; b < blocks; ++b)
            aff::quant::decode_block(w + (static_cast<std::size_t>(r) * blocks + b) * aff::quant::kBlockBytes, codebook,
                                     row.data() + static_cast<std::size_t>(b) * aff::quant::kBlockWeights);
        for (float& v : row) v = bf16_round(v);
        rows_times(row, r, n, k, xr, m, y);
    }
}

}  // namespace aff::cpu
