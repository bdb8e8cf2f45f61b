// ForwardBackend::open (backend.hpp): the CPU reference wrapper, and in GPU builds the GPU
// model wrapper and the choice between them.
#include "aff/gpu/backend.hpp"

#include "aff/core/error.hpp"

#if defined(AFF_HAVE_GPU)
#include "aff/checkpoint/checkpoint.hpp"
#include "aff/gpu/device.hpp"
#include "aff/gpu/forward.hpp"

#include <filesystem>
#endif

namespace aff {
namespace {

class CpuBackend final : public ForwardBackend {
public:
    explicit CpuBackend(const Model& m) : model_(m), state_(m.new_state()) {}
    bool on_gpu() const override { return false; }
    std::string describe() const override { return "cpu: the reference forward"; }
    std::int64_t position() const override { return state_.position; }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        return model_.forward(state_, tokens, all_logits);
    }

private:
    const Model& model_;
    DecodeState state_;
};

#if defined(AFF_HAVE_GPU)
class GpuBackend final : public ForwardBackend {
public:
    GpuBackend(const Model& m, const Checkpoint* ck, const gpu::GpuOptions& o)
        : info_(gpu::device_info(o.device)), model_(m, ck, o), state_(model_.new_state()) {}
    bool on_gpu() const override { return true; }
    std::string describe() const override { return "GPU " + std::to_string(info_.ordinal) + " (" + info_.name + "); " + model_.describe(); }
    std::int64_t position() const override { return state_.position; }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        return model_.forward(state_, tokens, all_logits);
    }

private:
    gpu::DeviceInfo info_;
    gpu::GpuModel model_;
    gpu::GpuDecodeState state_;
};
#endif

}  // namespace

bool gpu_support_built() {
#if defined(AFF_HAVE_GPU)
    return true;
#else
    return false;
#endif
}

std::unique_ptr<ForwardBackend> ForwardBackend::open(const Model& cpu, const std::string& checkpoint_dir,
                                                     const BackendOptions& options, const ForwardOptions& forward) {
    if (options.gpus == 0) return std::make_unique<CpuBackend>(cpu);
#if defined(AFF_HAVE_GPU)
    // The GPU forward takes routed experts from a DenseExpertSource only so far: a model whose
    // experts stay quantised in a container runs on the CPU unless a GPU is asked for.
    const bool dense_experts = dynamic_cast<const DenseExpertSource*>(cpu.weights().experts.get()) != nullptr;
    if (options.gpus < 0 && (gpu::device_count() == 0 || !dense_experts)) return std::make_unique<CpuBackend>(cpu);
    if (options.gpus > 1)
        throw_unsupported("--gpus " + std::to_string(options.gpus) +
                          ": the GPU forward runs on one GPU so far (layers are not split across devices yet)");
    const std::vector<int> devices = gpu::select_devices(1);
    gpu::GpuOptions o;
    o.device = devices[0];
    o.memory_cap_bytes = options.gpu_mib << 20;
    o.forward = forward;
    std::unique_ptr<Checkpoint> ck;
    if (!checkpoint_dir.empty() && std::filesystem::is_directory(checkpoint_dir))
        ck = std::make_unique<Checkpoint>(checkpoint_dir);
    return std::make_unique<GpuBackend>(cpu, ck.get(), o);
#else
    if (options.gpus > 0)
        throw_usage("--gpus " + std::to_string(options.gpus) +
                    ": this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
    return std::make_unique<CpuBackend>(cpu);
#endif
}

}  // namespace aff
