// The DSpark drafter (model doc §5.2): the model's DSpark stages guess a block of up to γ
// tokens after the one just chosen, in one pass, and the confidence head decides how many of
// them the verify call checks. Its state is the stages' context rings, built from the trunk's
// tap features (the mean of the streams after the tap layers), which it hears of for every
// forward call, verify calls included. What runs the stages and where the taps come from is a
// DsparkRunner's (dspark_runner.hpp): on a CPU trunk, the CPU reference fed through
// CpuSequence's StreamObserver (cpu_dspark_runner.hpp); on a GPU trunk, the trunk's taps
// computed on the device and the stages on the device too where they fit there, else on the
// CPU (gpu_dspark_runner.hpp). This class is
// the logic both share, as MtpDrafter is the MTP drafter's. The rings take only
// trunk-confirmed positions, and only when a proposal needs them: every forward call's tap
// rows are kept (a call that starts at position p replaces the rows from p on: rejected
// guesses), and a proposal extends the rings to the trunk's position, so plain steps between
// proposals (--draft auto's windows without drafts) cost the rings nothing. A ring row
// depends on its own position's taps alone, so rings more than a window behind restart a
// window back and hold the same rows. The draft block reads the rings without writing them,
// so nothing has to be put back after a rejection: at each proposal the rings hold what a
// fresh build over the trunk's positions holds (dspark_drafter_test.cpp). The tap rows of the
// last two windows are kept, so a trunk that goes back (the server's prefix cache) rebuilds
// the same rings where it can; where it cannot (a restored prefix), the first window of
// drafts sees less context: weaker, never wrong.
//
// How many tokens: guess i carries the confidence c_i = sigmoid(head) that it survives given
// that the earlier ones did, so Π_{j≤i} c_j estimates the chance the verify call keeps it. The
// drafter proposes guess i while that product is at least `min_survival` (the first guess
// always), up to min(γ, max_tokens).
//
// At temperature 0 the guesses are the Markov-corrected logits' argmax, plain guesses
// (drafter.hpp), and a runner that can pick them on its own side computes all min(γ,
// max_tokens) of them and their confidences in one call (DsparkRunner::greedy: on the GPU's
// device stages no logits row crosses the bus), the cut then applied here; else each is drawn
// by its own seeded sampler and its distribution handed to the loop for speculative
// acceptance: where the runner can draw on its own side (DsparkRunner::sampled: the device
// stages) from the plain tempered softmax with this sampler's draws, all of them in one call,
// their q rows coming back with the ids; else one row at a time on the host with the
// generation's sampling parameters. Either way the next guess's Markov correction follows the
// guess made.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/draft_rows.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/dspark_runner.hpp"
#include "libaff/runtime/sampler.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace aff {

// The default survival threshold: a guess is verified while its estimated chance of being kept
// is at least one in four (a verify call's extra token costs far less than a decode step; tests
// pass 0 to verify every guess).
constexpr float dspark_min_survival = 0.25f;

class DsparkDrafter final : public Drafter, private TapListener {
public:
    // On `runner` (not null; throws internal otherwise); max_tokens at least 1 (throws usage).
    DsparkDrafter(std::unique_ptr<DsparkRunner> runner, std::size_t max_tokens,
                  float min_survival = dspark_min_survival);
    // On the CPU reference: make_cpu_dspark_runner(model, trunk), which throws unsupported for
    // a model without DSpark stages. `trunk` is the CPU sequence the generation runs on; both
    // must outlive the drafter.
    DsparkDrafter(const Model& model, CpuSequence& trunk, std::size_t max_tokens,
                  float min_survival = dspark_min_survival);
    ~DsparkDrafter() override;
    DsparkDrafter(const DsparkDrafter&) = delete;
    DsparkDrafter& operator=(const DsparkDrafter&) = delete;

    // min(γ, the max_tokens asked for).
    std::size_t max_tokens() const override { return max_tokens_; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override;
    std::span<const float> draft_distribution(std::size_t i) const override;
    bool draft_on_device() const override { return q_.on_device(); }
    // Also marks the next forward call as the start of a new sequence for the rings.
    void start(const SamplerParams& sampling) override;
    // Off: the runner stops the trunk's taps (DsparkRunner::set_listening). The rings need the
    // last window's taps (a ring row depends on its own position's alone), so a window of
    // positions heard before a proposal gives the rings a continuous build holds: the first
    // call heard after a stretch off leaves a gap, on which the rings restart (on_taps).
    void set_listening(bool on) override { runner_->set_listening(on); }
    std::size_t warmup_positions() const override { return std::size_t(window_); }

    // The runner, with the rings (tests compare them with a fresh build's), and the last
    // proposal's confidences c_0 .. (one per guess computed, at least as many as guesses
    // proposed).
    const DsparkRunner& runner() const { return *runner_; }
    std::span<const float> confidences() const { return confidences_; }

private:
    void on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) override;
    // Forgets the rings' past: the next positions start at `position`.
    void restart(std::int64_t position);
    // Extends the rings up to `position` (exclusive) from the rows kept.
    void extend_to(std::int64_t position);
    std::int32_t pick(std::span<const float> logits, std::size_t j);

    std::unique_ptr<DsparkRunner> runner_;
    const std::size_t max_tokens_;
    const float min_survival_;
    const std::size_t row_;    // floats of one position's taps (taps * D)
    const std::int64_t window_;
    // The trunk's taps of positions [taps_start_, taps_start_ + taps_.size() / row_).
    std::vector<float> taps_;
    std::int64_t taps_start_ = 0;
    bool new_sequence_ = true;
    std::optional<Sampler> sampler_;  // empty at temperature 0
    DraftRows q_;  // [guesses, V] when sampling (on the host, or where the runner's chain left them)
    std::vector<float> confidences_;
    std::size_t guesses_ = 0;
};

}  // namespace aff
