// HostDsparkStages and the CPU trunk's feed (cpu_dspark_runner.hpp).
#include "libaff/runtime/cpu_dspark_runner.hpp"

#include "libaff/core/error.hpp"

namespace aff {

HostDsparkStages::HostDsparkStages(const Model& model) : model_(model) {
    if (!model.has_dspark()) throw_unsupported("the model has no DSpark stages to draft with");
    state_ = model.new_dspark_state();
}

std::vector<float> HostDsparkStages::guess_logits(std::size_t i, std::int32_t prev) {
    const std::size_t V = std::size_t(model_.config().vocab_size);
    if ((i + 1) * V > block_.logits.size()) throw_internal("DSpark guess_logits: no such row of the block");
    std::vector<float> row(block_.logits.begin() + std::ptrdiff_t(i * V), block_.logits.begin() + std::ptrdiff_t((i + 1) * V));
    model_.dspark_markov(prev, row);
    return row;
}

float HostDsparkStages::confidence(std::size_t i, std::int32_t prev) {
    const std::size_t D = std::size_t(model_.config().hidden_size);
    if ((i + 1) * D > block_.y.size()) throw_internal("DSpark confidence: no such row of the block");
    return model_.dspark_confidence(std::span<const float>(block_.y).subspan(i * D, D), prev);
}

namespace {

// The CPU trunk's taps, as CpuSequence hands them to its stream observer.
class CpuTrunkDsparkRunner final : public HostDsparkStages, private StreamObserver {
public:
    CpuTrunkDsparkRunner(const Model& model, CpuSequence& trunk) : HostDsparkStages(model), trunk_(trunk) {
        trunk_.set_stream_observer(this);
    }
    ~CpuTrunkDsparkRunner() override { trunk_.set_stream_observer(nullptr); }
    std::int64_t trunk_position() const override { return trunk_.position(); }
    void listen(TapListener* listener) override { listener_ = listener; }
    void set_listening(bool on) override { listening_ = on; }
    // The stages' routing goes to the trunk's route observer (a trace), as its last call had it.
    void block(std::int32_t anchor) override {
        route_to(trunk_.state().routes);
        HostDsparkStages::block(anchor);
    }

private:
    void on_streams(std::int64_t, std::size_t, std::span<const float>) override {}
    bool wants_taps() const override { return listening_; }
    void on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) override {
        if (listener_) listener_->on_taps(start, n, taps);
    }

    CpuSequence& trunk_;
    TapListener* listener_ = nullptr;
    bool listening_ = true;
};

}  // namespace

std::unique_ptr<DsparkRunner> make_cpu_dspark_runner(const Model& model, CpuSequence& trunk) {
    return std::make_unique<CpuTrunkDsparkRunner>(model, trunk);
}

}  // namespace aff
