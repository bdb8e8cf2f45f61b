// What the end-to-end GPU benchmarks (decode_bench, prefill_forward_bench) share: the first
// device chosen and named, a container loaded the way aff-run's GPU path loads it (the CPU
// model for the weights, the container again for the bytes the GPU keeps as stored: dense
// FP8), with the load time and the GPU model's description printed, and the extrapolation of
// a few measured layers to V4-Flash's 43 by attention kind. And what the two tier benchmarks
// (tiers_bench, prefill_tiers_bench) both began with: the mapped-read ceiling printed, the CPU
// model and the reader loaded once for the many GPU models built over them (each timed and its
// tiers described), a tier slot's size, the median. Needs a GPU build.
#pragma once

#include "libaff/container/container.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/gpu/read_ceiling.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
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

// The tier benchmarks' start: the container's CPU model and stored-bytes reader, no GPU model
// yet (each scenario builds its own over them: build_tier_model); the load time printed.
inline BenchModel load_bench_cpu(const std::string& path, aff::ThreadPool& pool) {
    const auto t0 = std::chrono::steady_clock::now();
    BenchModel m;
    m.cpu = aff::Model::load(path, pool);
    m.stored = std::make_unique<aff::ContainerTensorReader>(
        std::make_shared<const aff::Container>(aff::Container::open(path)));
    std::printf("%s: CPU model loaded in %.1f s\n", path.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return m;
}

// A GPU model over m's CPU model and reader with options o; prints "[label] built in S s: " and
// its tiers' description.
inline std::unique_ptr<GpuModel> build_tier_model(const BenchModel& m, const GpuOptions& o, const std::string& label) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = std::make_unique<GpuModel>(*m.cpu, m.stored.get(), o);
    std::printf("[%s] built in %.1f s: %s\n", label.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), g->tiers().describe().c_str());
    return g;
}

// The mapped-read ceiling (libaff/gpu/read_ceiling.hpp: the bus figures' bound), measured and printed.
inline double print_mapped_read_ceiling(int multiprocessors) {
    const double pcie = measure_mapped_read_ceiling(multiprocessors);
    std::printf("mapped-read ceiling (streaming read of 1 GiB of pinned host memory over the bus): %.2f GB/s\n", pcie / 1e9);
    return pcie;
}

// The bytes of one slab or pool slot: an expert's extent rounded up to 256 (what the slab and
// pool caps are counted in).
inline std::size_t tier_slot_bytes(const GpuModel& g) { return (g.expert_extent(0, 0).bytes + 255) / 256 * 256; }

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The all-resident decode benchmarks' sequences (decode_bench, copy_interference_bench):
// kDecodeBatchMax of them, each after a prompt of `prompt` tokens, with a next token each, all
// drawn uniformly from the vocabulary (seed 7: the same inputs every run).
struct DecodeBatch {
    std::vector<GpuDecodeState> states;
    std::vector<GpuDecodeState*> ptrs;  // into states
    std::vector<std::int32_t> next;

    DecodeBatch(GpuModel& g, int prompt) {
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> tok(0, g.config().vocab_size - 1);
        for (int i = 0; i < kDecodeBatchMax; ++i) states.push_back(g.new_state());
        for (auto& s : states) ptrs.push_back(&s);
        std::vector<std::int32_t> p(static_cast<std::size_t>(prompt));
        next.resize(kDecodeBatchMax);
        for (int i = 0; i < kDecodeBatchMax; ++i) {
            for (auto& t : p) t = tok(rng);
            g.forward(states[i], p, false);
            next[i] = tok(rng);
        }
    }
    DecodeBatch(const DecodeBatch&) = delete;
    DecodeBatch& operator=(const DecodeBatch&) = delete;

    // ms of one decode call of the first B sequences (wall clock of GpuModel::decode: uploads,
    // the graph replay, the logits back), the median of `steps` after `warmup` untimed calls.
    double step_ms(GpuModel& g, int B, int steps, int warmup) {
        const std::span<GpuDecodeState* const> seqs(ptrs.data(), B);
        const std::span<const std::int32_t> toks(next.data(), B);
        for (int w = 0; w < warmup; ++w) g.decode(seqs, toks);
        std::vector<double> ms;
        for (int s = 0; s < steps; ++s) {
            const auto a = std::chrono::steady_clock::now();
            g.decode(seqs, toks);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
        }
        return median(ms);
    }
};

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
