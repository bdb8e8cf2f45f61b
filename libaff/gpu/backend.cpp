// ForwardBackend::open (backend.hpp): the CPU reference wrapper, and in GPU builds the GPU
// model wrapper and the choice between them.
#include "libaff/gpu/backend.hpp"

#include "libaff/core/error.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"

#include <algorithm>
#include <filesystem>
#endif

namespace aff {
namespace {

// Host bytes of a CPU decode state: its float vectors and the per-layer records.
std::size_t host_state_bytes(const DecodeState& state) {
    std::size_t floats = 0;
    auto add = [&](const std::vector<LayerState>& layers) {
        for (const LayerState& l : layers) {
            floats += l.ring.size();
            for (const CompressorState* c : {&l.compressor, &l.indexer})
                floats += c->pending_kv.size() + c->pending_gate.size() + c->prev_kv.size() + c->prev_gate.size() +
                          c->entries.size();
        }
    };
    add(state.layers);
    add(state.mtp);
    return floats * sizeof(float) + (state.layers.size() + state.mtp.size()) * sizeof(LayerState);
}

// The CPU sequence state is plain host vectors (forward.hpp): a snapshot is a copy of it.
class CpuSnapshot final : public BackendSnapshot {
public:
    explicit CpuSnapshot(DecodeState s) : state(std::move(s)) {}
    std::int64_t position() const override { return state.position; }
    std::size_t bytes() const override { return host_state_bytes(state) + sizeof(*this); }
    DecodeState state;
};

class CpuBackend final : public ForwardBackend {
public:
    explicit CpuBackend(const Model& m) : model_(m), state_(m.new_state()) {}
    bool on_gpu() const override { return false; }
    std::string describe() const override { return "cpu: the reference forward"; }
    std::int64_t position() const override { return state_.position; }
    void reset() override { state_ = model_.new_state(); }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        state_.routes = routes_;  // reset() and restore() replace the state, not the observer
        return model_.forward(state_, tokens, all_logits);
    }
    void set_route_observer(RouteObserver* observer) override { routes_ = observer; }
    bool can_snapshot() const override { return true; }
    std::unique_ptr<BackendSnapshot> snapshot() const override { return std::make_unique<CpuSnapshot>(state_); }
    void restore(const BackendSnapshot& snapshot) override {
        const auto* s = dynamic_cast<const CpuSnapshot*>(&snapshot);
        if (!s) throw_usage("restore: the snapshot was not taken by the CPU backend");
        state_ = s->state;
    }

private:
    const Model& model_;
    DecodeState state_;
    RouteObserver* routes_ = nullptr;
};

#if defined(AFF_HAVE_GPU)
// The bytes of the device state that matter at the snapshot's position, in host memory
// (GpuModel::snapshot), or the CPU attention's state: the budget counts what is held.
class GpuSnapshot final : public BackendSnapshot {
public:
    explicit GpuSnapshot(gpu::GpuStateSnapshot s) : state(std::move(s)) {}
    std::int64_t position() const override { return state.position; }
    std::size_t bytes() const override {
        return state.device.size() + host_state_bytes(state.attention) + sizeof(*this);
    }
    gpu::GpuStateSnapshot state;
};

class GpuBackend final : public ForwardBackend {
public:
    GpuBackend(const Model& m, const TensorReader* weights, const gpu::GpuOptions& o)
        : model_(m, weights, o), state_(model_.new_state()) {}
    bool on_gpu() const override { return true; }
    std::string describe() const override {
        std::string s;
        for (int d : model_.devices()) s += (s.empty() ? "GPU " : ", GPU ") + std::to_string(d) + " (" + gpu::device_info(d).name + ")";
        return s + "; " + model_.describe();
    }
    std::int64_t position() const override { return state_.position; }
    void reset() override { state_ = model_.new_state(); }
    std::vector<float> forward(std::span<const std::int32_t> tokens, bool all_logits) override {
        return model_.forward(state_, tokens, all_logits);
    }
    bool can_snapshot() const override { return true; }
    std::unique_ptr<BackendSnapshot> snapshot() const override {
        return std::make_unique<GpuSnapshot>(model_.snapshot(state_));
    }
    void restore(const BackendSnapshot& snapshot) override {
        const auto* s = dynamic_cast<const GpuSnapshot*>(&snapshot);
        if (!s) throw_usage("restore: the snapshot was not taken by the GPU backend");
        model_.restore(state_, s->state);
    }

private:
    gpu::GpuModel model_;
    gpu::GpuDecodeState state_;
};
#endif

}  // namespace

std::unique_ptr<BackendSnapshot> ForwardBackend::snapshot() const {
    throw_unsupported(describe() + ": this backend cannot snapshot its sequence state");
}

void ForwardBackend::set_route_observer(RouteObserver*) {
    throw_unsupported(describe() + ": route traces are recorded on the CPU path only so far (--gpus 0)");
}

void ForwardBackend::restore(const BackendSnapshot&) {
    throw_unsupported(describe() + ": this backend cannot restore a sequence state");
}

bool gpu_support_built() {
#if defined(AFF_HAVE_GPU)
    return true;
#else
    return false;
#endif
}

std::unique_ptr<ForwardBackend> ForwardBackend::open(const Model& cpu, const std::string& model_path,
                                                     const BackendOptions& options, const ForwardOptions& forward) {
    if (options.gpus == 0) return std::make_unique<CpuBackend>(cpu);
#if defined(AFF_HAVE_GPU)
    if (options.gpus < 0 && gpu::device_count() == 0) return std::make_unique<CpuBackend>(cpu);
    // --gpus N: the first N visible devices, the layers split across them (forward.hpp).
    const std::vector<int> devices = gpu::select_devices(std::max(options.gpus, 1));
    gpu::GpuOptions o;
    o.device = devices[0];
    if (devices.size() > 1) o.devices = devices;
    o.memory_cap_bytes = options.gpu_mib << 20;
    o.forward = forward;
    // The model file again, for the bytes of weights the GPU keeps as stored (FP8 dense
    // weights): opening maps and validates, it reads no tensor data.
    std::unique_ptr<TensorReader> weights;
    if (!model_path.empty() && std::filesystem::is_directory(model_path))
        weights = std::make_unique<Checkpoint>(model_path);
    else if (!model_path.empty() && std::filesystem::is_regular_file(model_path))
        weights = std::make_unique<ContainerTensorReader>(std::make_shared<const Container>(Container::open(model_path)));
    return std::make_unique<GpuBackend>(cpu, weights.get(), o);
#else
    (void)model_path;
    if (options.gpus > 0)
        throw_usage("--gpus " + std::to_string(options.gpus) +
                    ": this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
    return std::make_unique<CpuBackend>(cpu);
#endif
}

}  // namespace aff
