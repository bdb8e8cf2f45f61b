// A drafter that never guesses, for tests that need a DraftGate around something (the gate's
// memory and recall: tests/unit/runtime/draft_memory_test.cpp, tests/fuzz/draft_memory_fuzz.cpp).
#pragma once

#include "libaff/runtime/drafter.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff::test {

class SilentDrafter final : public Drafter {
public:
    std::size_t max_tokens() const override { return 3; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t>) override { return {}; }
    void verified(std::size_t, std::size_t) override {}
};

}  // namespace aff::test
