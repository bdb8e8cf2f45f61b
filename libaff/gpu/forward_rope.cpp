// See forward_rope.hpp.
#include "libaff/gpu/forward_rope.hpp"

#include "libaff/core/error.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"

namespace aff::gpu {
namespace {

RopeTable table_of(const std::vector<float>& inv_freq) {
    RopeTable table;
    if (inv_freq.empty() || inv_freq.size() > static_cast<std::size_t>(kRopeMaxPairs))
        throw_unsupported("GPU RoPE: " + std::to_string(inv_freq.size()) + " rotary pairs (1.." +
                          std::to_string(kRopeMaxPairs) + " supported)");
    table.pairs = static_cast<int>(inv_freq.size());
    for (int j = 0; j < table.pairs; ++j) table.theta[j] = inv_freq[j];
    return table;
}

}  // namespace

void rope_with_inv_freq(float* x, const std::int32_t* positions, int tokens, int vecs, int dim,
                        const std::vector<float>& inv_freq, bool inverse, void* stream) {
    rope(x, positions, tokens, vecs, dim, table_of(inv_freq), inverse, stream);
}

void rms_norm_rope_with_inv_freq(const float* x, const float* w, float* y, int tokens, int vecs, int dim, float eps,
                                 const std::int32_t* positions, const std::vector<float>& inv_freq, void* stream) {
    rms_norm_rope(x, w, y, tokens, vecs, dim, eps, positions, table_of(inv_freq), false, stream);
}

}  // namespace aff::gpu
