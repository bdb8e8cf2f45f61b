// What the DSpark tests build their expected rings with (tests/unit/runtime/dspark_drafter_test.cpp
// on the CPU, tests/gpu/dspark_test.cpp on the device): a fresh CPU build of the rings over a
// trunk's positions, and a tap listener that feeds every trunk call's taps straight into a
// runner (no drafts: nothing to reject), and, when given, into a CPU DsparkState too, so that
// the two are compared on the same taps.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/dspark_runner.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace aff::test {

// The rings a fresh build over the trunk's positions 0 .. P-1 of `tokens` holds (the CPU trunk's taps).
inline DsparkState fresh_dspark_rings(const Model& model, std::span<const std::int32_t> tokens, std::int64_t P) {
    DecodeState trunk = model.new_state();
    std::vector<float> taps;
    trunk.taps = &taps;
    model.forward(trunk, tokens.first(std::size_t(P)), false);
    DsparkState st = model.new_dspark_state();
    model.dspark_extend(st, taps);
    return st;
}

class RingFeed final : public TapListener {
public:
    // `cpu` and `also` both or neither: `also` then gets the same taps through cpu.dspark_extend.
    explicit RingFeed(DsparkRunner& r, const Model* cpu = nullptr, DsparkState* also = nullptr)
        : r_(r), cpu_(cpu), also_(also) {
        r_.listen(this);
    }
    ~RingFeed() override { r_.listen(nullptr); }
    void on_taps(std::int64_t start, std::size_t, std::span<const float> taps) override {
        if (start != r_.position()) r_.restart(start);
        r_.extend(taps);
        if (!also_) return;
        if (start != also_->position) *also_ = cpu_->new_dspark_state(start);
        cpu_->dspark_extend(*also_, taps);
    }

private:
    DsparkRunner& r_;
    const Model* cpu_;
    DsparkState* also_;
};

}  // namespace aff::test
