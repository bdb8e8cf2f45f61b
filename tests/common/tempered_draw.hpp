// The host's account of a draw from the tempered softmax by a given uniform (the contract of
// kernels/sample_rows.hpp and MtpRunner::sampled_chain), in double precision, for the tests
// that check a backend's sampled chain: q = softmax(logits / temperature) with NaN as no mass,
// and the first id whose running sum of q exceeds u. `margin` receives how close u is to the
// nearest running-sum boundary (a float backend may land on the neighbour within rounding).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace aff::test {

inline std::vector<double> tempered_softmax(std::span<const float> logits, double temperature) {
    double max = -std::numeric_limits<double>::infinity();
    for (float v : logits)
        if (!std::isnan(v)) max = std::max(max, double(v));
    std::vector<double> q(logits.size(), 0.0);
    if (!std::isfinite(max)) {
        q[0] = 1.0;  // nothing to draw from: id 0, as the device does
        return q;
    }
    double sum = 0;
    for (std::size_t i = 0; i < q.size(); ++i)
        if (!std::isnan(logits[i])) sum += q[i] = std::exp((double(logits[i]) - max) / temperature);
    for (double& x : q) x /= sum;
    return q;
}

inline std::int32_t tempered_draw(std::span<const double> q, double u, double* margin = nullptr) {
    double run = 0, nearest = std::numeric_limits<double>::infinity();
    std::int32_t id = -1, last = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
        if (q[i] <= 0) continue;
        nearest = std::min(nearest, std::fabs(u - run));
        run += q[i];
        nearest = std::min(nearest, std::fabs(u - run));
        last = std::int32_t(i);
        if (id < 0 && run > u) id = std::int32_t(i);
    }
    if (margin) *margin = nearest;
    return id >= 0 ? id : last;
}

}  // namespace aff::test
