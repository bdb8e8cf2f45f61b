// The GPU trunk's feed for the host DSpark stages (gpu_dspark_runner.hpp).
#include "libaff/runtime/gpu_dspark_runner.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/runtime/cpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

namespace aff {
namespace {

class GpuTrunkDsparkRunner final : public HostDsparkStages, private TapListener {
public:
    GpuTrunkDsparkRunner(const Model& model, Sequence& sequence, GpuTrunk& trunk)
        : HostDsparkStages(model), sequence_(sequence), trunk_(trunk) {
        trunk_.set_tap_listener(this);
    }
    ~GpuTrunkDsparkRunner() override { trunk_.set_tap_listener(nullptr); }
    std::int64_t trunk_position() const override { return sequence_.position(); }
    void listen(TapListener* listener) override { listener_ = listener; }

private:
    void on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) override {
        if (listener_) listener_->on_taps(start, n, taps);
    }

    Sequence& sequence_;
    GpuTrunk& trunk_;
    TapListener* listener_ = nullptr;
};

}  // namespace

std::unique_ptr<DsparkRunner> make_gpu_dspark_runner(const Model& model, Sequence& backend, std::string& why_not) {
    auto* trunk = dynamic_cast<GpuTrunk*>(&backend);
    if (!trunk) {
        why_not = "not a GPU sequence";
        return nullptr;
    }
    if (!model.has_dspark()) {
        why_not = "the model has no DSpark stages";
        return nullptr;
    }
    if (trunk->gpu_model().layer_split().size() != 1) {
        why_not = "DSpark taps need the trunk on one GPU (its layers are split across GPUs)";
        return nullptr;
    }
    if (trunk->gpu_model().draft_placement() != gpu::DraftPlacement::automatic) {
        // The stages' experts are the CPU reference's: there is nothing on the GPU to place.
        why_not = "--draft-placement places the MTP layer's experts; DSpark's stages run on the CPU beside a GPU trunk so far "
                  "(leave it at auto)";
        return nullptr;
    }
    return std::make_unique<GpuTrunkDsparkRunner>(model, backend, *trunk);
}

}  // namespace aff
#else
namespace aff {
std::unique_ptr<DsparkRunner> make_gpu_dspark_runner(const Model&, Sequence&, std::string& why_not) {
    why_not = "this build has no GPU support";
    return nullptr;
}
}  // namespace aff
#endif
