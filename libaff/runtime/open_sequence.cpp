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
    o.forward = forward;
    // The model file again, for the bytes of weights the GPU keeps as stored (FP8 dense
    // weights): opening maps and validates, it reads no tensor data.
    std::unique_ptr<TensorReader> weights;
    if (!model_path.empty() && std::filesystem::is_directory(model_path))
        weights = std::make_unique<Checkpoint>(model_path);
    else if (!model_path.empty() && std::filesystem::is_regular_file(model_path))
        weights = std::make_unique<ContainerTensorReader>(std::make_shared<const Container>(Container::open(model_path)));
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
