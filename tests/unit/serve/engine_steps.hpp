// The prefill and decode steps of the server's generation, for tests that drive an engine's
// sequence by hand: a new sequence with the prompt, then one token a call.
#pragma once

#include "libaff/serve/engine.hpp"

#include <span>
#include <vector>

namespace aff::test {

inline std::vector<float> prefill(serve::Engine& engine, std::span<const std::int32_t> tokens) {
    engine.sequence().reset();
    return engine.sequence().forward(tokens, false);
}

inline std::vector<float> decode(serve::Engine& engine, std::int32_t token) {
    return engine.sequence().forward(std::span<const std::int32_t>(&token, 1), false);
}

}  // namespace aff::test
