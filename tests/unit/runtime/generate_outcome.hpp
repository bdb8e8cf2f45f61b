// What a generation gave, as the drafter tests compare it (mtp_drafter_test.cpp,
// dspark_drafter_test.cpp): the tokens, every position's logits, the statistics and where the
// sequence ended; generate_on runs one with an optional drafter.
#pragma once

#include "libaff/runtime/generate.hpp"

#include <cstdint>
#include <vector>

namespace aff::test {

struct Outcome {
    std::vector<std::int32_t> tokens;
    std::vector<std::vector<float>> logits;
    GenerateStats stats;
    std::int64_t end_position = 0;
};

inline Outcome generate_on(Sequence& sequence, const GenerateOptions& opt, Drafter* drafter) {
    Outcome out;
    GenerateHooks h;
    h.on_step = [&](const GenerationStep& s) {
        out.tokens.push_back(s.token);
        return true;
    };
    h.on_logits = [&](std::int64_t, std::int32_t, std::span<const float> l) { out.logits.emplace_back(l.begin(), l.end()); };
    h.drafter = drafter;
    out.stats = generate(sequence, opt, h);
    out.end_position = sequence.position();
    return out;
}

}  // namespace aff::test
