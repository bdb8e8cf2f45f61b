// CPU twin of the router (see router_topk.hpp): sqrt(softplus), selection, normalisation.
#include "libaff/gpu/reference/router_topk.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace aff::cpu {

void router_topk(const float* logits, int tokens, const gpu::RouterConfig& c, const float* bias,
                 const int32_t* tid2eid, const int32_t* token_ids, int32_t* ids, float* weights) {
    std::vector<double> score(c.experts);
    std::vector<int> order(c.experts);
    for (int t = 0; t < tokens; ++t) {
        const float* lt = logits + static_cast<std::size_t>(t) * c.experts;
        for (int e = 0; e < c.experts; ++e) {
            const double v = lt[e];
            score[e] = std::sqrt(v > 20.0 ? v : std::log1p(std::exp(v)));  // PyTorch's threshold
        }
        std::vector<int> chosen;
        if (tid2eid) {
            const int32_t* row = tid2eid + static_cast<std::size_t>(token_ids[t]) * c.top_k;
            chosen.assign(row, row + c.top_k);
        } else {
            // The key is rounded to fp32 as on the GPU, so both sides rank the same values.
            std::vector<float> key(c.experts);
            for (int e = 0; e < c.experts; ++e)
                key[e] = static_cast<float>(score[e]) + (bias ? bias[e] : 0.0f);
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + c.top_k, order.end(), [&](int a, int b) {
                return key[a] > key[b] || (key[a] == key[b] && a < b);
            });
            chosen.assign(order.begin(), order.begin() + c.top_k);
        }
        double sum = 0.0;
        for (int e : chosen) sum += score[e];
        for (int j = 0; j < c.top_k; ++j) {
            ids[t * c.top_k + j] = chosen[j];
            weights[t * c.top_k + j] = static_cast<float>(score[chosen[j]] / sum * c.route_scale);
        }
    }
}

}  // namespace aff::cpu
