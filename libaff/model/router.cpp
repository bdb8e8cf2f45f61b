// route (router.hpp): the router's arithmetic exactly as the CPU forward has always done it.
#include "libaff/model/router.hpp"

#include "libaff/model/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace aff {

void route(const float* logits, int tokens, const RouterShape& shape, const float* bias, const std::int32_t* tid2eid,
           const std::int32_t* token_ids, std::int32_t* ids, float* weights, float* keys) {
    const int E = shape.experts, k = shape.top_k;
    std::vector<float> score(E), key(E);
    std::vector<int> order(E);
    for (int t = 0; t < tokens; ++t) {
        const float* lt = logits + std::size_t(t) * E;
        for (int e = 0; e < E; ++e) score[e] = std::sqrt(ops::softplus(lt[e]));
        std::int32_t* sel = ids + std::size_t(t) * k;
        if (tid2eid) {
            for (int j = 0; j < k; ++j) sel[j] = tid2eid[std::size_t(token_ids[t]) * k + j];
        } else {
            for (int e = 0; e < E; ++e) key[e] = bias ? score[e] + bias[e] : score[e];
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + k, order.end(),
                              [&](int x, int y) { return key[x] > key[y] || (key[x] == key[y] && x < y); });
            std::copy(order.begin(), order.begin() + k, sel);
            if (keys) std::copy(key.begin(), key.end(), keys + std::size_t(t) * E);
        }
        float sum = 0;
        for (int j = 0; j < k; ++j) sum += score[sel[j]];
        for (int j = 0; j < k; ++j) {
            const float g = shape.normalise ? score[sel[j]] / (sum + 1e-20f) : score[sel[j]];
            weights[std::size_t(t) * k + j] = g * shape.route_scale;
        }
    }
}

}  // namespace aff
