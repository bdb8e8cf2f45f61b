// The MTP runner (mtp_runner.hpp) of the CPU reference: the MTP layer is Model::mtp_forward on
// a DecodeState of its own (only its `mtp` layers), the stream store a host ring of the last
// W positions' streams, filled from CpuSequence's StreamObserver.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/mtp_runner.hpp"

namespace aff {

class CpuMtpRunner final : public MtpRunner, private StreamObserver {
public:
    // `model` must have an MTP layer (throws unsupported otherwise); the runner becomes
    // `trunk`'s stream observer. Both must outlive it.
    CpuMtpRunner(const Model& model, CpuSequence& trunk);
    ~CpuMtpRunner() override;

    std::size_t vocab_size() const override { return std::size_t(model_.config().vocab_size); }
    std::size_t window() const override { return window_; }
    std::int64_t trunk_position() const override { return trunk_.position(); }
    void listen(TrunkCallListener* listener) override { listener_ = listener; }
    void keep(std::int64_t position, std::size_t from_row, std::size_t n) override;
    std::int64_t position() const override { return state_.mtp_position; }
    void restart(std::int64_t position) override;
    std::vector<float> run(std::span<const std::int32_t> next_tokens) override;
    std::vector<float> chain(std::int32_t token) override;
    void save_ring() override { saved_ = state_.mtp[0].ring; }
    void restore_ring(std::int64_t position) override;
    std::vector<float> ring() const override { return state_.mtp[0].ring; }

    // The MTP layer's state (mtp, mtp_position; the trunk layers are empty).
    const DecodeState& state() const { return state_; }

private:
    void on_streams(std::int64_t start, std::size_t n, std::span<const float> streams) override;

    const Model& model_;
    CpuSequence& trunk_;
    const std::size_t row_;     // floats of one position's streams (hc_mult * D)
    const std::size_t window_;
    DecodeState state_;
    std::vector<LayerState> empty_mtp_;
    std::vector<float> saved_;
    std::vector<float> store_;  // [W][hc, D], slot = position mod W
    std::vector<float> out_;    // the MTP layer's last output row [hc, D]
    std::vector<float> rows_;
    std::span<const float> call_;  // the streams of the trunk call being reported
    TrunkCallListener* listener_ = nullptr;
};

}  // namespace aff
