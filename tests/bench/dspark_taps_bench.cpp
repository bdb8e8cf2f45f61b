// What the DSpark drafter's own bookkeeping costs a trunk call on the host (issue 18: auto's
// plain steps with a DSpark drafter listening): DsparkDrafter keeps the trunk's tap rows of
// the last window and more for a rebuild, and hears every call's rows (TapListener::on_taps).
// A stub runner stands for the stages (its extend copies nothing), so what is timed is the
// drafter's handling of a decode step's rows at V4-Flash-0731's geometry (3 taps, D 4096,
// window 128: a row is 48 KiB): the median µs a call over CALLS one-token calls after a
// prompt of 64, and the mean (what periodic work costs spread over the calls), against the
// bound, one copy of the call's row (memcpy of 48 KiB, timed here).
//     dspark_taps_bench [CALLS]   (default 4000)
#include "libaff/runtime/dspark_drafter.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

class StubRunner final : public aff::DsparkRunner {
public:
    StubRunner() {
        config_.hidden_size = 4096;
        config_.sliding_window = 128;
        config_.vocab_size = 129280;
        config_.dspark.tap_layers = {40, 41, 42};
    }
    const aff::ModelConfig& config() const override { return config_; }
    std::int64_t trunk_position() const override { return trunk; }
    void listen(aff::TapListener* l) override { listener = l; }
    std::int64_t position() const override { return position_; }
    void restart(std::int64_t p) override { position_ = p; }
    void extend(std::span<const float> taps) override { position_ += std::int64_t(taps.size() / (3 * 4096)); }
    void block(std::int32_t) override {}
    std::vector<float> guess_logits(std::size_t, std::int32_t) override { return {}; }
    float confidence(std::size_t, std::int32_t) override { return 1.0f; }
    std::vector<float> ring(std::size_t) const override { return {}; }
    aff::TapListener* listener = nullptr;
    std::int64_t trunk = 0;

private:
    aff::ModelConfig config_;
    std::int64_t position_ = 0;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const int calls = argc > 1 ? std::max(200, std::atoi(argv[1])) : 4000;
    auto runner = std::make_unique<StubRunner>();
    StubRunner& r = *runner;
    aff::DsparkDrafter drafter(std::move(runner), 3);
    drafter.start({});
    const std::size_t row = 3 * 4096;
    std::vector<float> prompt(64 * row, 0.5f), step(row, 0.25f), copy(row);
    r.listener->on_taps(0, 64, prompt);
    r.trunk = 64;
    std::vector<double> us, bound;
    for (int i = 0; i < calls; ++i) {
        step[std::size_t(i) % row] = float(i);
        auto t0 = Clock::now();
        r.listener->on_taps(r.trunk, 1, step);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        ++r.trunk;
        t0 = Clock::now();
        std::memcpy(copy.data(), step.data(), row * 4);
        bound.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    double mean = 0;
    for (double x : us) mean += x / double(us.size());
    std::printf("figure: DsparkDrafter::on_taps, one decode step's rows (48 KiB), %d calls: median %.1f us, mean %.1f us a call\n",
                calls, median(us), mean);
    std::printf("bound: one copy of the row: %.1f us\n", median(bound));
    std::printf("ratio: mean / bound %.1f\n", mean / std::max(1e-3, median(bound)));
    return 0;
}
