// GpuMtpRunner (gpu_mtp_runner.hpp): the drafter's MTP steps on the device.
#include "libaff/runtime/gpu_mtp_runner.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/core/error.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

namespace aff {
namespace {

class GpuMtpRunner final : public MtpRunner, private TrunkCallListener {
public:
    GpuMtpRunner(Sequence& sequence, GpuTrunk& trunk)
        : sequence_(sequence), trunk_(trunk), model_(trunk.gpu_model()), state_(model_.new_mtp_state()) {
        trunk_.set_call_listener(this);
    }
    ~GpuMtpRunner() override { trunk_.set_call_listener(nullptr); }

    std::size_t vocab_size() const override { return std::size_t(model_.config().vocab_size); }
    std::size_t window() const override { return std::size_t(model_.config().sliding_window); }
    std::int64_t trunk_position() const override { return sequence_.position(); }
    void listen(TrunkCallListener* listener) override { listener_ = listener; }
    void keep(std::int64_t position, std::size_t from_row, std::size_t n) override {
        if (!in_call_) throw_internal("GpuMtpRunner::keep outside a trunk call");
        model_.keep_streams(state_, position, int(from_row), int(n));
    }
    std::int64_t position() const override { return state_.mtp_position; }
    void restart(std::int64_t position) override { model_.mtp_restart(state_, position); }
    std::vector<float> run(std::span<const std::int32_t> next_tokens) override {
        return model_.mtp_forward(state_, next_tokens, gpu::MtpInput::trunk);
    }
    std::vector<float> chain(std::int32_t token) override {
        const std::int32_t one[1] = {token};
        return model_.mtp_forward(state_, one, gpu::MtpInput::own);
    }
    bool greedy_chain(std::span<const std::int32_t> next_tokens, std::size_t k,
                      std::vector<std::int32_t>& guesses) override {
        if (k > window()) return false;  // the chain's id buffer holds a window
        guesses = model_.mtp_draft_greedy(state_, next_tokens, k);
        return true;
    }
    bool sampled_chain(std::span<const std::int32_t> next_tokens, std::size_t k, float temperature,
                       std::span<const double> uniforms, std::vector<std::int32_t>& guesses,
                       std::vector<float>* q) override {
        if (k > window()) return false;
        guesses = model_.mtp_draft_sampled(state_, next_tokens, k, temperature, uniforms, q);
        return true;
    }
    bool chain_q_on_device() const override { return true; }
    std::vector<float> chain_q(std::size_t rows) const override { return model_.last_chain_q(rows); }
    void save_ring() override { model_.mtp_save_ring(state_); }
    void restore_ring(std::int64_t position) override { model_.mtp_restore_ring(state_, position); }
    std::vector<float> ring() const override { return model_.mtp_ring(state_); }

private:
    void on_trunk_call(std::int64_t start, std::size_t n) override {
        if (!listener_) return;
        in_call_ = true;
        try {
            listener_->on_trunk_call(start, n);
        } catch (...) {
            in_call_ = false;
            throw;
        }
        in_call_ = false;
    }

    Sequence& sequence_;
    GpuTrunk& trunk_;
    gpu::GpuModel& model_;
    gpu::GpuDecodeState state_;
    TrunkCallListener* listener_ = nullptr;
    bool in_call_ = false;
};

}  // namespace

std::unique_ptr<MtpRunner> make_gpu_mtp_runner(Sequence& backend, std::string& why_not) {
    auto* trunk = dynamic_cast<GpuTrunk*>(&backend);
    if (!trunk) {
        why_not = "not a GPU sequence";
        return nullptr;
    }
    if (!trunk->gpu_model().has_mtp()) {
        why_not = "the MTP layer is not on the GPU: " + trunk->gpu_model().mtp_why_not();
        return nullptr;
    }
    return std::make_unique<GpuMtpRunner>(backend, *trunk);
}

}  // namespace aff
#else
namespace aff {
std::unique_ptr<MtpRunner> make_gpu_mtp_runner(Sequence&, std::string& why_not) {
    why_not = "this build has no GPU support";
    return nullptr;
}
}  // namespace aff
#endif
