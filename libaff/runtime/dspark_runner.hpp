// What the DSpark drafter (dspark_drafter.hpp) asks of a backend, so that one drafter's logic
// (the rings' catch-up over the trunk's confirmed positions, the tap rows kept for a rebuild,
// the sequential Markov correction and the confidence cut) serves every trunk, as MtpRunner
// (mtp_runner.hpp) does for the MTP drafter. A runner holds the stages' context rings and
// their next position, runs the draft block, and brings the trunk's tap features of each of
// its forward calls to the drafter. cpu_dspark_runner.hpp runs the stages on the CPU
// reference (Model::dspark_*), fed by a CPU trunk (CpuSequence's StreamObserver) or by a GPU
// trunk (GpuModel::set_taps: the taps computed on the device, their means brought to host);
// gpu_dspark_runner.hpp runs them on the device beside a GPU trunk where they fit there.
#pragma once

#include "libaff/checkpoint/config.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace aff {

// Hears the trunk's tap features of every forward call (calls a rewind replays included):
// taps [n, taps, D] of the n tokens run at positions start, start + 1, ...
class TapListener {
public:
    virtual ~TapListener() = default;
    virtual void on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) = 0;
};

class DsparkRunner {
public:
    virtual ~DsparkRunner() = default;
    // The model's configuration (vocabulary, D, γ, the tap layers, the window).
    virtual const ModelConfig& config() const = 0;
    // The trunk sequence's position (tokens it has run).
    virtual std::int64_t trunk_position() const = 0;
    // Who hears the trunk's taps (null: nobody); the runner stops telling it when destroyed.
    virtual void listen(TapListener* listener) = 0;
    // Whether the trunk computes its taps at all (on from construction): off, its calls make
    // none and nobody hears of them (the GPU trunk's tap copies and their trip to the host
    // stop; the CPU trunk's forward takes no tap rows). Drafter::set_listening says when.
    virtual void set_listening(bool on) { (void)on; }
    // The rings' next position; restart forgets their past: the next position is `position`.
    virtual std::int64_t position() const = 0;
    virtual void restart(std::int64_t position) = 0;
    // Model::dspark_extend: taps [n, taps, D] of positions position() .. + n into the rings.
    virtual void extend(std::span<const float> taps) = 0;
    // Model::dspark_block on the rings (which it leaves as they are) for `anchor`; the
    // guesses' rows are then read with the two calls below.
    virtual void block(std::int32_t anchor) = 0;
    // Row i of the last block's logits with the Markov correction of `prev`, the token before
    // guess i (Model::dspark_markov), and guess i's confidence (Model::dspark_confidence).
    virtual std::vector<float> guess_logits(std::size_t i, std::int32_t prev) = 0;
    virtual float confidence(std::size_t i, std::int32_t prev) = 0;
    // The greedy chain of the last block in one call, where the backend can pick on its own
    // side: `count` guesses, guess i the argmax (ties: the lower id) of guess_logits(i, prev_i),
    // prev_0 = `anchor` (the block's) and prev_i = guess i - 1, into ids, and confidence(i,
    // prev_i) into confidences (within the backend's rounding); true. False (nothing run) where
    // the backend has no such path: the drafter then runs the per-guess calls. The GPU's device
    // stages run the chain on the device (GpuModel::dspark_greedy).
    virtual bool greedy(std::int32_t anchor, std::size_t count, std::vector<std::int32_t>& ids,
                        std::vector<float>& confidences) {
        (void)anchor, (void)count, (void)ids, (void)confidences;
        return false;
    }
    // The same chain with each guess drawn where the backend runs: guess i from q_i =
    // softmax(guess_logits(i, prev_i) / temperature) (no top-k, top-p or min-p) by uniforms[i]
    // in [0, 1), the first id whose running sum of q_i exceeds it; q's rows [count, V] into *q,
    // or (q null, only where chain_q_on_device()) left on the device for chain_q. False
    // (nothing run) where the backend has no such path. The GPU's device stages draw on the
    // device (GpuModel::dspark_sampled), one copy of ids and confidences.
    virtual bool sampled(std::int32_t anchor, std::size_t count, float temperature, std::span<const double> uniforms,
                         std::vector<std::int32_t>& ids, std::vector<float>& confidences, std::vector<float>* q) {
        (void)anchor, (void)count, (void)temperature, (void)uniforms, (void)ids, (void)confidences, (void)q;
        return false;
    }
    // As MtpRunner's: whether sampled() can leave q on the trunk's device, and a host copy.
    virtual bool chain_q_on_device() const { return false; }
    virtual std::vector<float> chain_q(std::size_t rows) const {
        (void)rows;
        return {};
    }
    // Stage s's ring [W, Dh] in host memory (tests).
    virtual std::vector<float> ring(std::size_t stage) const = 0;
    // Where the stages run, for the drafter's start-up line: "stages on the CPU", or on the
    // GPU with where their experts are, or on the CPU beside a GPU trunk with the reason.
    virtual std::string stages() const { return "stages on the CPU"; }
};

}  // namespace aff
