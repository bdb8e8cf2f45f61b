// Tests for runtime/greedy_pick.hpp, the greedy rule the sampler, the drafters and the GPU's
// argmax_rows share: the lowest id of the largest value, NaN never winning, a NaN at id 0
// never left, a cut to the first `candidates` ids; and the sampler at temperature 0 agrees.
#include "libaff/runtime/greedy_pick.hpp"
#include "libaff/runtime/sampler.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <vector>

TEST_CASE("the greedy pick is the lowest id of the largest value, NaN never winning", "[runtime]") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<std::vector<float>> rows = {
        {1, 5, 5, 2},        // tie: the lower id
        {nan, 9, 1, 3},      // NaN at 0 is never left
        {1, nan, 4, nan},    // NaN elsewhere never wins
        {-inf, -inf, -inf},  // nothing larger than id 0
        {-0.0f, 0.0f, -1},   // -0 and +0 are equal
        {2, 3, inf, inf},    // the first +inf
    };
    const std::vector<std::int32_t> want = {1, 0, 2, 0, 0, 2};
    aff::SamplerParams greedy;
    greedy.temperature = 0;
    aff::Sampler sampler(greedy);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        INFO("row " << r);
        CHECK(aff::greedy_pick(rows[r]) == want[r]);
        CHECK(sampler.sample(rows[r]) == want[r]);
    }
    const std::vector<float> rising = {0, 1, 2, 3, 4, 5};
    CHECK(aff::greedy_pick(rising, 4) == 3);
    CHECK(aff::greedy_pick(rising, 1) == 0);
    CHECK(aff::greedy_pick(rising, 100) == 5);
    CHECK(aff::greedy_pick({}, 3) == 0);
    std::vector<float> two_rows = rising;
    two_rows.insert(two_rows.end(), rows[0].begin(), rows[0].end());
    two_rows.insert(two_rows.end(), 2, 0.0f);
    CHECK(aff::greedy_picks(two_rows, 6, 6) == std::vector<std::int32_t>{5, 1});
    CHECK(aff::greedy_picks(two_rows, 6, 2) == std::vector<std::int32_t>{1, 1});
}
