// See forward_rope.hpp.
#include "aff/gpu/forward_rope.hpp"

#include "aff/core/error.hpp"
#include "kernels/rope.hpp"

namespace aff::gpu {

void rope_with_inv_freq(float* x, const std::int32_t* positions, int tokens, int vecs, int dim,
                        const std::vector<float>& inv_freq, bool inverse, void* stream) {
    RopeTable table;
    if (inv_freq.empty() || inv_freq.size() > static_cast<std::size_t>(kRopeMaxPairs))
        throw_unsupported("GPU RoPE: " + std::to_string(inv_freq.size()) + " rotary pairs (1.." +
                          std::to_string(kRopeMaxPairs) + " supported)");
    table.pairs = static_cast<int>(inv_freq.size());
    for (int j = 0; j < table.pairs; ++j) table.theta[j] = inv_freq[j];
    rope(x, positions, tokens, vecs, dim, table, inverse, stream);
}

}  // namespace aff::gpu
