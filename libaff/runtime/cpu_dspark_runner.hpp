// DSpark runners (dspark_runner.hpp) whose stages run on the CPU reference (Model::dspark_*
// on a DsparkState in host memory): HostDsparkStages is that part, and the CPU trunk's feed
// (CpuSequence's StreamObserver) completes it here; gpu_dspark_runner.hpp completes it with a
// GPU trunk's feed (its tap features computed on the device, GpuModel::set_taps) where the
// stages cannot run on the device (gpu_dspark_runner.hpp says when; its device runner is the
// other DsparkRunner). The verified tokens are the trunk's whatever the guesses, so where the
// stages run changes the drafts' speed, never the output.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/dspark_runner.hpp"

#include <memory>

namespace aff {

// The stages' part, common to both feeds: the rings and the last block in host memory. The
// feed (trunk_position, listen) is the subclass's.
class HostDsparkStages : public DsparkRunner {
public:
    // `model` must have DSpark stages (throws unsupported otherwise) and outlive the runner.
    explicit HostDsparkStages(const Model& model);
    const ModelConfig& config() const override { return model_.config(); }
    std::int64_t position() const override { return state_.position; }
    void restart(std::int64_t position) override { state_ = model_.new_dspark_state(position); }
    void extend(std::span<const float> taps) override { model_.dspark_extend(state_, taps); }
    void block(std::int32_t anchor) override { block_ = model_.dspark_block(state_, anchor); }
    std::vector<float> guess_logits(std::size_t i, std::int32_t prev) override;
    float confidence(std::size_t i, std::int32_t prev) override;
    std::vector<float> ring(std::size_t stage) const override { return state_.stages.at(stage).ring; }

protected:
    // Who sees the next blocks' routing (Model::dspark_block's DsparkState::routes).
    void route_to(RouteObserver* routes) { state_.routes = routes; }
    const Model& model_;

private:
    DsparkState state_;
    DsparkBlock block_;
};

// `model` must have DSpark stages (throws unsupported otherwise); it and `trunk` must outlive
// the runner, which becomes the trunk's stream observer.
std::unique_ptr<DsparkRunner> make_cpu_dspark_runner(const Model& model, CpuSequence& trunk);

}  // namespace aff
