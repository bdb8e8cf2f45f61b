// What both halves of the fidelity sweep test read and cut: the golden tokens and reference logits of
// a sweep case (tests/data/sweep/<case>.safetensors, tests/oracle/fidelity_sweep.py), and the uneven
// chunk plan they run a prompt in. Shared by tests/unit/model/sweep_test.cpp and tests/gpu/sweep_test.cpp.
#pragma once

#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/core/error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace aff::test {

struct SweepGolden {
    std::vector<std::int32_t> tokens;
    std::vector<float> logits;  // [S, V]
};

inline SweepGolden read_sweep_golden(const std::string& path) {
    SafetensorsFile f(path);
    const SafetensorsTensor* t = f.find("tokens");
    const SafetensorsTensor* l = f.find("logits");
    if (!t || !l) throw_format("no tokens or logits tensor", path);
    SweepGolden g;
    for (std::uint64_t i = 0; i < t->elements(); ++i) {
        std::int64_t v;
        std::memcpy(&v, f.data(*t) + 8 * i, 8);
        g.tokens.push_back(static_cast<std::int32_t>(v));
    }
    g.logits.resize(l->elements());
    std::memcpy(g.logits.data(), f.data(*l), l->nbytes);
    return g;
}

// Uneven chunks that cut windows and rings at odd places: growing sizes from 1 + seed % 5, then the rest.
inline std::vector<int> sweep_chunk_plan(int S, int seed) {
    std::vector<int> plan;
    int at = 0, c = 1 + seed % 5;
    while (at < S) {
        const int n = std::min(c, S - at);
        plan.push_back(n);
        at += n;
        c = c * 2 + 1 + seed % 3;
    }
    return plan;
}

}  // namespace aff::test
