// What the DSpark tests share (tests/unit/runtime/dspark_drafter_test.cpp on the CPU,
// tests/gpu/dspark_test.cpp on the device): a fresh CPU build of the rings over a trunk's
// positions; a tap listener that feeds every trunk call's taps straight into a runner (no
// drafts: nothing to reject), and, when given, into a CPU DsparkState too, so that the two are
// compared on the same taps; and a drafter that hands the generation loop the known greedy
// continuation for some guesses, so that verify calls keep prefixes of every length; and a
// runner forwarding everything but the greedy chain (ForwardingDsparkRunner).
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/dspark_runner.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
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

// A runner that forwards every call to `inner` except greedy (DsparkRunner's default: none),
// for tests that set a runner's own greedy chain, or its absence, beside the same stages.
class ForwardingDsparkRunner : public DsparkRunner {
public:
    explicit ForwardingDsparkRunner(std::unique_ptr<DsparkRunner> inner) : inner_(std::move(inner)) {}
    const ModelConfig& config() const override { return inner_->config(); }
    std::int64_t trunk_position() const override { return inner_->trunk_position(); }
    void listen(TapListener* l) override { inner_->listen(l); }
    std::int64_t position() const override { return inner_->position(); }
    void restart(std::int64_t position) override { inner_->restart(position); }
    void extend(std::span<const float> taps) override { inner_->extend(taps); }
    void block(std::int32_t anchor) override { inner_->block(anchor); }
    std::vector<float> guess_logits(std::size_t i, std::int32_t prev) override { return inner_->guess_logits(i, prev); }
    float confidence(std::size_t i, std::int32_t prev) override { return inner_->confidence(i, prev); }
    std::vector<float> ring(std::size_t stage) const override { return inner_->ring(stage); }
    std::string stages() const override { return inner_->stages(); }

protected:
    DsparkRunner& inner() { return *inner_; }

private:
    std::unique_ptr<DsparkRunner> inner_;
};

// Proposes what the inner drafter proposes (so its state lives through the generation), but
// hands the loop the run's known greedy continuation `truth` (after a prompt of `prompt`
// tokens) for the first (call mod 4) guesses, then the drafter's own.
class Prompted final : public Drafter {
public:
    Prompted(Drafter& inner, std::vector<std::int32_t> truth, std::size_t prompt)
        : inner_(inner), truth_(std::move(truth)), prompt_(prompt) {}
    std::size_t max_tokens() const override { return inner_.max_tokens(); }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override {
        std::vector<std::int32_t> g = inner_.propose(context);
        const std::size_t at = context.size() - prompt_;  // truth_[at] follows context
        for (std::size_t i = 0; i < g.size() && i < (calls_ % 4) && at + i < truth_.size(); ++i) g[i] = truth_[at + i];
        ++calls_;
        return g;
    }
    void start(const SamplerParams& s) override { inner_.start(s); }
    void verified(std::size_t p, std::size_t a) override { inner_.verified(p, a); }

private:
    Drafter& inner_;
    std::vector<std::int32_t> truth_;
    std::size_t prompt_;
    std::size_t calls_ = 0;
};

}  // namespace aff::test
