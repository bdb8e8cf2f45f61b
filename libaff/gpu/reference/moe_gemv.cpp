// CPU twin of the codebook-expert GEMV (see moe_gemv.hpp): decode every block with the
// reference decoder, multiply and sum in double.
#include "libaff/gpu/reference/moe_gemv.hpp"

#include "libaff/core/error.hpp"
#include "libaff/quant/trellis.hpp"

#include <cstddef>
#include <vector>

namespace aff::cpu {

void moe_gemv(const uint8_t* w, int n, int k, const aff::quant::Codebook& codebook, const float* x, int batch,
              float* y) {
    if (n <= 0 || k <= 0 || k % aff::quant::kBlockWeights != 0 || batch < 1)
        aff::throw_format("moe_gemv twin: n and batch must be positive and k a multiple of 256");
    const int blocks = k / aff::quant::kBlockWeights;
    std::vector<float> row(static_cast<size_t>(k));
    for (int r = 0; r < n; ++r) {
        for (int b = 0; b < blocks; ++b)
            aff::quant::decode_block(w + (static_cast<size_t>(r) * blocks + b) * aff::quant::kBlockBytes, codebook,
                                     row.data() + static_cast<size_t>(b) * aff::quant::kBlockWeights);
        for (int i = 0; i < batch; ++i) {
            const float* xb = x + static_cast<size_t>(i) * k;
            double acc = 0.0;
            for (int c = 0; c < k; ++c) acc += static_cast<double>(row[c]) * xb[c];
            y[static_cast<size_t>(i) * n + r] = static_cast<float>(acc);
        }
    }
}

}  // namespace aff::cpu
