// open_sequence (open_sequence.hpp): the choice between the CPU reference and, in GPU builds,
// the GPU model.
#include "libaff/runtime/open_sequence.hpp"

#include "libaff/core/error.hpp"
#include "libaff/runtime/cpu_sequence.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

#include <algorithm>
#include <filesystem>
#endif

namespace aff {

bool gpu_support_built() {
#if defined(AFF_HAVE_GPU)
    return true;
#else
    return false;
#endif
}

std::unique_ptr<Sequence> open_sequence(const Model& cpu, const std::string& model_path, const BackendOptions& options,
                                        const ForwardOptions& forward) {
    if (options.gpus == 0) return std::make_unique<CpuSequence>(cpu);
#if defined(AFF_HAVE_GPU)
    if (options.gpus < 0 && gpu::device_count() == 0) return std::make_unique<CpuSequence>(cpu);
    // --gpus N: the first N visible devices, the layers split across them (forward.hpp).
    const std::vector<int> devices = gpu::select_devices(std::max(options.gpus, 1));
    gpu::GpuOptions o;
    o.device = devices[0];
    if (devices.size() > 1) o.devices = devices;
    o.memory_cap_bytes = options.gpu_mib << 20;
    auto bytes = [](std::optional<std::size_t> mib) {
        return mib ? std::optional<std::size_t>(*mib << 20) : std::nullopt;
    };
    o.tiers.slab_cap = bytes(options.gpu_expert_mib);
    o.tiers.headroom = bytes(options.gpu_headroom_mib);
    o.tiers.host_pool = bytes(options.host_pool_mib);
    o.tiers.host_reserve = options.host_pool_reserve_mib << 20;
    o.tiers.strategy = options.placement_strategy;
    o.tiers.heat = options.heat;
    if (options.expert_prefetch < 0) throw_usage("--expert-prefetch: expected 0 or more experts a layer");
    o.tiers.prefetch_experts = options.expert_prefetch;
    if (options.draft_placement == "vram") o.draft_placement = gpu::DraftPlacement::vram;
    else if (options.draft_placement == "ram") o.draft_placement = gpu::DraftPlacement::ram;
    else if (options.draft_placement == "auto") o.draft_placement = gpu::DraftPlacement::automatic;
    else throw_usage("--draft-placement: expected auto, vram or ram, got \"" + options.draft_placement + "\"");
    o.forward = forward;
    // The model file again, for the bytes of weights the GPU keeps as stored (FP8 dense
    // weights): opening maps and validates, it reads no tensor data.
    std::unique_ptr<TensorReader> weights;
    std::shared_ptr<const Container> container;
    if (!model_path.empty() && std::filesystem::is_directory(model_path)) {
        weights = std::make_unique<Checkpoint>(model_path);
    } else if (!model_path.empty() && std::filesystem::is_regular_file(model_path)) {
        container = std::make_shared<const Container>(Container::open(model_path));
        weights = std::make_unique<ContainerTensorReader>(container);
    }
    // The expert tiers' initial order: the profile given, or the container's own.
    const ModelConfig& c = cpu.config();
    auto fits = [&](const quant::ExpertProfile& p) {
        return p.layers == std::uint32_t(c.num_layers) && p.experts == std::uint32_t(c.n_routed_experts);
    };
    if (!options.expert_profile.empty()) {
        quant::ExpertProfile p = quant::ExpertProfile::read_file(options.expert_profile);
        if (!fits(p))
            throw_usage("--expert-profile " + options.expert_profile + " has " + std::to_string(p.layers) + " layers of " +
                        std::to_string(p.experts) + " experts, the model " + std::to_string(c.num_layers) + " of " +
                        std::to_string(c.n_routed_experts));
        o.tiers.profile = std::move(p.counts);
    } else if (container && container->expert_profile()) {
        quant::ExpertProfile p = quant::ExpertProfile::parse(*container->expert_profile(), model_path + ": profile section");
        if (fits(p)) o.tiers.profile = std::move(p.counts);
    }
    return make_gpu_sequence(cpu, weights.get(), o);
#else
    (void)model_path;
    (void)forward;
    if (options.gpus > 0)
        throw_usage("--gpus " + std::to_string(options.gpus) +
                    ": this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
    return std::make_unique<CpuSequence>(cpu);
#endif
}

}  // namespace aff
