// The GPU trunk's DSpark runners (gpu_dspark_runner.hpp): the device stages' (GpuModel's
// dspark_* on a GpuDsparkState) and the host stages' fed by the GPU trunk's taps.
#include "libaff/runtime/gpu_dspark_runner.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/runtime/cpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

namespace aff {
namespace {

// The trunk's taps to whoever listens; common to both runners.
class TapFeed : private TapListener {
public:
    TapFeed(Sequence& sequence, GpuTrunk& trunk) : sequence_(sequence), trunk_(trunk) { trunk_.set_tap_listener(this); }
    ~TapFeed() override { trunk_.set_tap_listener(nullptr); }
    std::int64_t position() const { return sequence_.position(); }
    void listen(TapListener* listener) { listener_ = listener; }
    // Off: the trunk computes no taps (GpuModel::set_taps(false)), its decode graphs without
    // the tap copies (kept beside those with them: switching recaptures nothing).
    void set_listening(bool on) { trunk_.set_tap_listener(on ? this : nullptr); }

private:
    void on_taps(std::int64_t start, std::size_t n, std::span<const float> taps) override {
        if (listener_) listener_->on_taps(start, n, taps);
    }

    Sequence& sequence_;
    GpuTrunk& trunk_;
    TapListener* listener_ = nullptr;
};

class HostStagesRunner final : public HostDsparkStages {
public:
    HostStagesRunner(const Model& model, Sequence& sequence, GpuTrunk& trunk, std::string where)
        : HostDsparkStages(model), feed_(sequence, trunk), where_(std::move(where)) {}
    std::int64_t trunk_position() const override { return feed_.position(); }
    void listen(TapListener* listener) override { feed_.listen(listener); }
    void set_listening(bool on) override { feed_.set_listening(on); }
    std::string stages() const override { return where_; }

private:
    TapFeed feed_;
    std::string where_;
};

class DeviceStagesRunner final : public DsparkRunner {
public:
    DeviceStagesRunner(const Model& model, Sequence& sequence, GpuTrunk& trunk)
        : model_(model), gpu_(trunk.gpu_model()), state_(gpu_.new_dspark_state()), feed_(sequence, trunk) {}
    const ModelConfig& config() const override { return model_.config(); }
    std::int64_t trunk_position() const override { return feed_.position(); }
    void listen(TapListener* listener) override { feed_.listen(listener); }
    void set_listening(bool on) override { feed_.set_listening(on); }
    std::int64_t position() const override { return state_.position; }
    void restart(std::int64_t position) override { gpu_.dspark_restart(state_, position); }
    void extend(std::span<const float> taps) override { gpu_.dspark_extend(state_, taps); }
    void block(std::int32_t anchor) override { gpu_.dspark_block(state_, anchor); }
    std::vector<float> guess_logits(std::size_t i, std::int32_t prev) override {
        return gpu_.dspark_guess_logits(state_, i, prev);
    }
    // The head's D + r products on the host over the block's y row: the CPU's own arithmetic.
    float confidence(std::size_t i, std::int32_t prev) override {
        return model_.dspark_confidence(gpu_.dspark_y(state_, i), prev);
    }
    bool greedy(std::int32_t anchor, std::size_t count, std::vector<std::int32_t>& ids,
                std::vector<float>& confidences) override {
        gpu::DsparkGreedy g = gpu_.dspark_greedy(state_, anchor, count);
        ids = std::move(g.ids);
        confidences = std::move(g.confidences);
        return true;
    }
    bool sampled(std::int32_t anchor, std::size_t count, float temperature, std::span<const double> uniforms,
                 std::vector<std::int32_t>& ids, std::vector<float>& confidences, std::vector<float>* q) override {
        gpu::DsparkGreedy g = gpu_.dspark_sampled(state_, anchor, count, temperature, uniforms, q != nullptr);
        ids = std::move(g.ids);
        confidences = std::move(g.confidences);
        if (q) *q = std::move(g.q);
        return true;
    }
    bool chain_q_on_device() const override { return true; }
    std::vector<float> chain_q(std::size_t rows) const override { return gpu_.last_chain_q(rows); }
    std::vector<float> ring(std::size_t stage) const override { return gpu_.dspark_ring(state_, stage); }
    std::string stages() const override {
        return std::string("stages on the GPU, their routed experts in ") + (gpu_.dspark_experts_in_host() ? "RAM" : "VRAM");
    }

private:
    const Model& model_;
    gpu::GpuModel& gpu_;
    gpu::GpuDsparkState state_;
    TapFeed feed_;
};

}  // namespace

std::unique_ptr<DsparkRunner> make_gpu_dspark_runner(const Model& model, Sequence& backend, std::string& why_not,
                                                     DsparkStages where) {
    auto* trunk = dynamic_cast<GpuTrunk*>(&backend);
    if (!trunk) {
        why_not = "not a GPU sequence";
        return nullptr;
    }
    if (!model.has_dspark()) {
        why_not = "the model has no DSpark stages";
        return nullptr;
    }
    gpu::GpuModel& g = trunk->gpu_model();
    if (g.layer_split().size() != 1) {
        why_not = "DSpark taps need the trunk on one GPU (its layers are split across GPUs)";
        return nullptr;
    }
    if (where == DsparkStages::automatic && g.has_dspark()) return std::make_unique<DeviceStagesRunner>(model, backend, *trunk);
    const std::string why = where == DsparkStages::host ? "asked for" : g.dspark_why_not();
    if (g.draft_placement() != gpu::DraftPlacement::automatic) {
        // The host stages' experts are the CPU reference's: there is nothing on the GPU to place.
        why_not = "--draft-placement places the draft's experts on the GPU; DSpark's stages run on the CPU here (" + why +
                  "): leave it at auto";
        return nullptr;
    }
    return std::make_unique<HostStagesRunner>(model, backend, *trunk, "stages on the CPU (" + why + ")");
}

}  // namespace aff
#else
namespace aff {
std::unique_ptr<DsparkRunner> make_gpu_dspark_runner(const Model&, Sequence&, std::string& why_not, DsparkStages) {
    why_not = "this build has no GPU support";
    return nullptr;
}
}  // namespace aff
#endif
