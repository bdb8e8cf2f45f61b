// A drafter wrapper that records every proposal, for the device tests that set a greedy draft
// chain on the device beside the same chain picked on the host (mtp_test.cpp, dspark_test.cpp)
// and compare their proposals one by one.
#pragma once

#include "libaff/runtime/drafter.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff::gpu::test {

// Forwards to `inner` and keeps what each propose() returned.
class Recording final : public aff::Drafter {
public:
    explicit Recording(aff::Drafter& inner) : inner_(inner) {}
    std::size_t max_tokens() const override { return inner_.max_tokens(); }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override {
        proposals.push_back(inner_.propose(context));
        return proposals.back();
    }
    std::span<const float> draft_distribution(std::size_t i) const override { return inner_.draft_distribution(i); }
    bool draft_on_device() const override { return inner_.draft_on_device(); }
    void start(const aff::SamplerParams& sampling) override { inner_.start(sampling); }
    void verified(std::size_t proposed, std::size_t accepted) override { inner_.verified(proposed, accepted); }
    std::vector<std::vector<std::int32_t>> proposals;

private:
    aff::Drafter& inner_;
};

}  // namespace aff::gpu::test
