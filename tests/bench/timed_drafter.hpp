// What the draft benchmarks (mtp_draft_bench on the CPU, mtp_gpu_bench on the GPU) share: a
// drafter that times another's proposals, the drafts' own cost, on the clock the bench
// trusts (CPU time of a one-thread run on the CPU; wall time on the GPU, whose work the host
// waits for).
#pragma once

#include "libaff/runtime/drafter.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff::bench {

class TimedDrafter final : public Drafter {
public:
    using Clock = double (*)();  // seconds
    TimedDrafter(Drafter& inner, Clock clock) : inner_(inner), clock_(clock) {}
    std::size_t max_tokens() const override { return inner_.max_tokens(); }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override {
        const double t0 = clock_();
        auto out = inner_.propose(context);
        seconds += clock_() - t0;
        return out;
    }
    std::span<const float> draft_distribution(std::size_t i) const override { return inner_.draft_distribution(i); }
    bool draft_on_device() const override { return inner_.draft_on_device(); }
    void start(const SamplerParams& s) override { inner_.start(s); }
    void verified(std::size_t p, std::size_t a) override { inner_.verified(p, a); }
    double seconds = 0;

private:
    Drafter& inner_;
    Clock clock_;
};

}  // namespace aff::bench
