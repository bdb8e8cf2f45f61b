// What the generation loop (generate.hpp) asks of a draft model for speculative decoding: a
// guess of the next few tokens, which the loop verifies in one forward call of the target
// model and keeps as far as the target agrees, rewinding the sequence (sequence.hpp) past the
// rest. How a guess is accepted depends on what the drafter says about it:
//   - a plain guess (no distribution): the loop accepts it only where it samples that very
//     token from the target's logits, so the tokens generated are those of a run without a
//     drafter, bit for bit on the CPU reference (whose logits do not depend on how tokens
//     are split into calls); at temperature 0 this is greedy verification;
//   - a guess drawn from a draft distribution q (draft_distribution): standard speculative
//     sampling (Sampler::speculative), accepting with min(1, p/q), which keeps the output
//     distributed as the target's sampling but not the same draws as a run without drafts.
// The MTP layer's drafter is mtp_drafter.hpp; tests also use scripted ones.
#pragma once

#include "libaff/runtime/sampler.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff {

class Drafter {
public:
    virtual ~Drafter() = default;
    // The most tokens one propose() returns: the loop keeps that many positions of the
    // sequence rewindable while it runs.
    virtual std::size_t max_tokens() const = 0;
    // Up to max_tokens() tokens guessed to follow `context` (the prompt and every token
    // chosen so far; the last one is not run yet). Empty: no guess this step.
    virtual std::vector<std::int32_t> propose(std::span<const std::int32_t> context) = 0;
    // The distribution guess i of the last proposal was drawn from, dense over the
    // vocabulary, valid until the next propose(); empty: a plain guess (see above).
    virtual std::span<const float> draft_distribution(std::size_t i) const {
        (void)i;
        return {};
    }
    // Whether the last proposal's distributions are also on the trunk's GPU, where its sampled
    // chain drew them (GpuModel::last_chain_q): a GPU verify call reads them there, and
    // draft_distribution copies them to the host only when asked.
    virtual bool draft_on_device() const { return false; }
    // A generation begins with these sampling parameters (called before its first propose()).
    virtual void start(const SamplerParams& sampling) { (void)sampling; }
    // How the last proposal fared: its first `accepted` of `proposed` tokens were the model's.
    virtual void verified(std::size_t proposed, std::size_t accepted) {
        (void)proposed;
        (void)accepted;
    }
    // Whether the drafter hears the trunk's forward calls (on from construction). A caller
    // that knows no proposal comes for a while (DraftGate's long runs of plain steps) turns it
    // off, so a drafter whose feed costs the trunk time (DSpark's taps: computed on the device
    // and brought to the host every call) can stop it, and on again at least
    // warmup_positions() trunk positions before the next propose(): then the proposal is what
    // it would have been had the drafter listened throughout. Proposals after less warm-up are
    // weaker, never wrong (the drafter restarts from what it heard). Default: always listens.
    virtual void set_listening(bool on) { (void)on; }
    // Trunk positions heard before a proposal that make it the same as with listening
    // throughout; 0 (the default): the drafter's listening costs nothing, and it is never
    // turned off.
    virtual std::size_t warmup_positions() const { return 0; }
};

}  // namespace aff
