// What the MTP drafter (mtp_drafter.hpp) asks of a backend, so that one drafter's logic (which
// positions to run, the catch-up over the trunk's accepted tokens, the chained guesses and the
// ring put back after them) serves the CPU reference and the GPU alike. A runner holds the MTP
// layer's state (its sliding ring and next position) and a store of the trunk's final streams
// of the last `window()` positions (slot = position mod window), filled from the trunk's
// forward calls as they happen, where the backend keeps them: host memory on the CPU
// (cpu_mtp_runner.hpp), device memory on the GPU (gpu_mtp_runner.hpp), so no stream row
// crosses the bus there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aff {

// Hears of every forward call of the trunk (calls a rewind replays included): n tokens run at
// positions start, start + 1, ...; while it runs, MtpRunner::keep can take the call's streams.
class TrunkCallListener {
public:
    virtual ~TrunkCallListener() = default;
    virtual void on_trunk_call(std::int64_t start, std::size_t n) = 0;
};

class MtpRunner {
public:
    virtual ~MtpRunner() = default;
    virtual std::size_t vocab_size() const = 0;
    // The MTP layer's sliding window: the positions its ring and the stream store hold.
    virtual std::size_t window() const = 0;
    // The trunk sequence's position (tokens it has run).
    virtual std::int64_t trunk_position() const = 0;
    // Who hears of the trunk's calls (null: nobody); the runner stops telling it when destroyed.
    virtual void listen(TrunkCallListener* listener) = 0;
    // From within on_trunk_call only: rows [from_row, from_row + n) of that call's streams
    // into the store at positions position, position + 1, ... (n <= window()).
    virtual void keep(std::int64_t position, std::size_t from_row, std::size_t n) = 0;
    // The MTP layer's next position.
    virtual std::int64_t position() const = 0;
    // Forgets the MTP layer's past: its next run is at `position`, on an empty ring.
    virtual void restart(std::int64_t position) = 0;
    // The MTP layer at positions position() .. + n on the stored trunk streams of those
    // positions and the tokens after them (next_tokens, n of them); returns the last row's
    // logits [V] and advances position() by n.
    virtual std::vector<float> run(std::span<const std::int32_t> next_tokens) = 0;
    // One more position on the MTP layer's own output streams of its last run or chain and
    // `token`; returns its logits [V].
    virtual std::vector<float> chain(std::int32_t token) = 0;
    // Saves the ring; puts it back and sets position() (chained guesses write ring rows the
    // trunk has not confirmed).
    virtual void save_ring() = 0;
    virtual void restore_ring(std::int64_t position) = 0;
    // A greedy chain in one call, where the backend can pick on its own side: what run(next_tokens)
    // then, for k > 1, save_ring, k - 1 chain()s on the previous guess and restore_ring at the
    // position after the run leave, with each guess its logits' argmax (ties: the lower id; the
    // drafter's greedy pick), the k guesses into `guesses`; true. False (nothing run) where the
    // backend has no such path: the drafter then runs the steps itself. The GPU's runs the
    // chain on the device, one copy of k ids to the host (GpuModel::mtp_draft_greedy).
    virtual bool greedy_chain(std::span<const std::int32_t> next_tokens, std::size_t k,
                              std::vector<std::int32_t>& guesses) {
        (void)next_tokens, (void)k, (void)guesses;
        return false;
    }
    // A sampled chain in one call, where the backend can draw on its own side: greedy_chain's
    // steps with guess j drawn from q_j = softmax(logits_j / temperature) (no top-k, top-p or
    // min-p) by the draw uniforms[j] in [0, 1), the first id whose running sum of q_j exceeds
    // uniforms[j]; the guesses into `guesses` and q's rows [k, V] into *q: the distributions
    // the drafter then reports (speculative sampling needs only that q be the one drawn from);
    // q null (only where chain_q_on_device()): the rows stay on the device, chain_q copies
    // them. False (nothing run) where the backend has no such path. The GPU's draws on the
    // device (GpuModel::mtp_draft_sampled), one copy of the ids a proposal.
    virtual bool sampled_chain(std::span<const std::int32_t> next_tokens, std::size_t k, float temperature,
                               std::span<const double> uniforms, std::vector<std::int32_t>& guesses,
                               std::vector<float>* q) {
        (void)next_tokens, (void)k, (void)temperature, (void)uniforms, (void)guesses, (void)q;
        return false;
    }
    // Whether a sampled chain can leave its q rows on the trunk's device (the GPU's: a verify
    // call reads them there, Drafter::draft_on_device), and their first `rows` rows in host
    // memory once it has.
    virtual bool chain_q_on_device() const { return false; }
    virtual std::vector<float> chain_q(std::size_t rows) const {
        (void)rows;
        return {};
    }
    // The ring [W, Dh] in host memory (tests).
    virtual std::vector<float> ring() const = 0;
};

}  // namespace aff
