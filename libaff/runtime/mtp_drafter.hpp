// The model's own drafter (model doc §5.1): the MTP layer `mtp.0` guesses the tokens after
// the one just chosen, on the CPU reference or the GPU (a backend's MtpRunner, mtp_runner.hpp,
// runs the layer; the logic here is the same for both). It keeps its own state (the MTP
// layer's sliding ring and position, in the runner), fed with the trunk's final streams of
// every forward call (CpuSequence's StreamObserver; the GPU sequence's call observer, the
// streams staying on the device), and runs the MTP layer once at every trunk position whose
// next token is known: at position q on (H[q], t[q+1]), as in training. A proposal first
// catches up over the positions the trunk has run since the last one (the accepted tokens of
// the last verify call, with the trunk's streams), whose last row gives the first guess;
// further guesses reuse the layer on its own output streams and its guess, one position on
// each. Those extra steps write the ring at positions the trunk has not confirmed, so the
// ring is put back after them: the state always holds exactly what a fresh MTP run over the
// trunk's positions holds (mtp_drafter_test.cpp; on the GPU within its rounding,
// tests/gpu/mtp_test.cpp), whatever the verifier accepted. Only the
// last window of streams is kept: a ring row depends on its own position's inputs alone, so
// after a stretch without proposals the layer restarts one window back and rebuilds the
// same ring. After a restored prefix (the server's prefix cache) the streams of the prefix
// are not there: the first window of drafts is then weaker, never wrong.
//
// At temperature 0 the guesses are the MTP logits' argmax, plain guesses (drafter.hpp), and a
// runner that can pick them on its own side runs the whole chain there (MtpRunner::greedy_chain:
// on the GPU no logits row crosses the bus, only the guesses' ids); else each is drawn with
// its own seeded sampler and its distribution handed to the loop for speculative acceptance:
// where the runner can draw on its own side (MtpRunner::sampled_chain: the GPU) from the plain
// tempered softmax with this sampler's draws, one copy of ids and q rows a proposal; else on
// the host with the generation's sampling parameters (top-k, top-p, min-p included). Either q
// is exact for the draws made from it, so the output stays the trunk's distribution.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/draft_rows.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/mtp_runner.hpp"
#include "libaff/runtime/sampler.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace aff {

class MtpDrafter final : public Drafter, private TrunkCallListener {
public:
    // Drafts with `runner` (not null); max_tokens must be at least 1 (throws usage).
    MtpDrafter(std::unique_ptr<MtpRunner> runner, std::size_t max_tokens);
    // On the CPU reference: `model` must have an MTP layer (throws unsupported otherwise).
    // `trunk` is the CPU sequence the generation runs on (directly or under a wrapper such as
    // the server's prefix cache); the drafter becomes its stream observer. Both must outlive
    // the drafter.
    MtpDrafter(const Model& model, CpuSequence& trunk, std::size_t max_tokens);
    ~MtpDrafter() override;
    MtpDrafter(const MtpDrafter&) = delete;
    MtpDrafter& operator=(const MtpDrafter&) = delete;

    std::size_t max_tokens() const override { return max_tokens_; }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override;
    std::span<const float> draft_distribution(std::size_t i) const override;
    bool draft_on_device() const override { return q_.on_device(); }
    // Also marks the next forward call as the start of a new sequence for the MTP layer.
    void start(const SamplerParams& sampling) override;

    // The MTP layer's next position and its ring [W, Dh] (tests compare them with a fresh run's).
    std::int64_t position() const { return runner_->position(); }
    std::vector<float> ring() const { return runner_->ring(); }

private:
    void on_trunk_call(std::int64_t start, std::size_t n) override;
    // A guess from one row of MTP logits; fills draft row j when sampling.
    std::int32_t pick(std::span<const float> logits, std::size_t j);

    std::unique_ptr<MtpRunner> runner_;
    const std::size_t max_tokens_;
    const std::int64_t window_;  // the MTP layer's sliding window: the positions its ring holds
    // The trunk's streams of positions [streams_start_, streams_end_) are in the runner's store.
    std::int64_t streams_start_ = 0, streams_end_ = 0;
    bool new_sequence_ = true;
    std::optional<Sampler> sampler_;  // empty at temperature 0
    DraftRows q_;  // [guesses, V] when sampling (on the host, or where the runner's chain left them)
    std::size_t guesses_ = 0;
};

}  // namespace aff
