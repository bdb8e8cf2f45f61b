// What the end-to-end GPU benchmarks (decode_bench, prefill_forward_bench) share: the first
// device chosen and named, and a container loaded the way aff-run's GPU path loads it (the
// CPU model for the weights, the container again for the bytes the GPU keeps as stored: dense
// FP8), with the load time and the GPU model's description printed. Needs a GPU build.
#pragma once

#include "aff/container/container.hpp"
#include "aff/core/thread_pool.hpp"
#include "aff/gpu/device.hpp"
#include "aff/gpu/forward.hpp"
#include "aff/model/container_tensors.hpp"
#include "aff/model/forward.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

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

inline BenchModel load_bench_model(const std::string& path, aff::ThreadPool& pool, int max_context) {
    const auto t0 = std::chrono::steady_clock::now();
    BenchModel m;
    m.cpu = aff::Model::load(path, pool);
    m.stored = std::make_unique<aff::ContainerTensorReader>(
        std::make_shared<const aff::Container>(aff::Container::open(path)));
    GpuOptions opt;
    opt.max_context = max_context;
    m.gpu = std::make_unique<GpuModel>(*m.cpu, m.stored.get(), opt);
    std::printf("%s: %d layers, load %.1f s\n%s\n", path.c_str(), m.gpu->config().num_layers,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                m.gpu->describe().c_str());
    return m;
}

}  // namespace aff::gpu::bench
