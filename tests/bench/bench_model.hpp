// What the end-to-end GPU benchmarks (decode_bench, prefill_forward_bench) share: the first
// device chosen and named, a container loaded the way aff-run's GPU path loads it (the CPU
// model for the weights, the container again for the bytes the GPU keeps as stored: dense
// FP8), with the load time and the GPU model's description printed, and the extrapolation of
// a few measured layers to V4-Flash's 43 by attention kind. Needs a GPU build.
#pragma once

#include "libaff/container/container.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace aff::gpu::bench {

// Selects device 0 and prints its name; returns its description.
inline DeviceInfo open_bench_device() {
    use_device(select_devices(1)[0]);
    DeviceInfo info = device_info(0);
    std::printf("device: %s, %d multiprocessors\n", info.name.c_str(), info.multiprocessors);
    return info;
}

// The GPU model of a container and what it borrows (the CPU model, the stored-bytes reader).
struct BenchModel {
    std::unique_ptr<aff::Model> cpu;
    std::unique_ptr<aff::ContainerTensorReader> stored;
    std::unique_ptr<GpuModel> gpu;
};

// gpus > 1: the layers split across the first `gpus` visible devices (GpuOptions::devices).
// With `opt` as given (tiers, draft placement).
inline BenchModel load_bench_model(const std::string& path, aff::ThreadPool& pool, const GpuOptions& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    BenchModel m;
    m.cpu = aff::Model::load(path, pool);
    m.stored = std::make_unique<aff::ContainerTensorReader>(
        std::make_shared<const aff::Container>(aff::Container::open(path)));
    m.gpu = std::make_unique<GpuModel>(*m.cpu, m.stored.get(), opt);
    std::printf("%s: %d layers, load %.1f s\n%s\n", path.c_str(), m.gpu->config().num_layers,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                m.gpu->describe().c_str());
    return m;
}

inline BenchModel load_bench_model(const std::string& path, aff::ThreadPool& pool, int max_context, int gpus = 1) {
    GpuOptions opt;
    opt.max_context = max_context;
    if (gpus > 1) opt.devices = select_devices(gpus);
    return load_bench_model(path, pool, opt);
}

// V4-Flash's 43 layers by attention kind (model doc §1.2), indexed by aff::AttentionKind.
inline constexpr int kFlashLayers[3] = {2, 21, 20};

inline const char* kind_name(aff::AttentionKind k) {
    return k == aff::AttentionKind::sliding ? "sliding" : k == aff::AttentionKind::csa ? "CSA" : "HCA";
}

// Per attention kind, the mean of what one layer of that kind adds to `prefix` (prefix[l]: a
// time or a byte count of the first l layers, l = 0 .. num_layers). Throws when the container
// lacks a kind, which extrapolation needs.
inline std::array<double, 3> per_kind_layer_mean(const aff::ModelConfig& c, const std::vector<double>& prefix) {
    std::array<double, 3> sum{};
    std::array<int, 3> count{};
    for (int l = 0; l < c.num_layers; ++l) {
        const int k = static_cast<int>(c.attention[l]);
        sum[k] += prefix[l + 1] - prefix[l];
        ++count[k];
    }
    for (int k = 0; k < 3; ++k) {
        if (count[k] == 0)
            throw std::runtime_error(std::string("the container has no ") + kind_name(aff::AttentionKind(k)) +
                                     " layer: make it with --layers 4 or more");
        sum[k] /= count[k];
    }
    return sum;
}

}  // namespace aff::gpu::bench
