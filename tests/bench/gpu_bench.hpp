// What the GPU benchmarks (tests/bench/*_bench.hip) share: the streaming read kernel that
// measures the HBM read ceiling in the same run (the bound every figure is divided by), the
// per-launch timer (plain stream launches and a captured graph of back-to-back launches,
// median of 7) and the read-only reference of one launch's bytes. Header-only, one per bench
// executable.
#pragma once

#include "aff/gpu/check.hpp"
#include "aff/gpu/device.hpp"
#include "kernels/device_common.hpp"

#include <algorithm>
#include <vector>

namespace aff::gpu::bench {

// Streams `n16` 16-byte words once; the xor keeps the loads alive, the impossible-looking
// store keeps the compiler from dropping them.
__global__ void __launch_bounds__(256) stream_read_kernel(const uint4* __restrict__ p, size_t n16, uint32_t* sink) {
    const size_t stride = static_cast<size_t>(gridDim.x) * 256;
    size_t i = static_cast<size_t>(blockIdx.x) * 256 + threadIdx.x;
    uint32_t acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const uint4 a = dev::load_stream(p + i), b = dev::load_stream(p + i + stride),
                    c = dev::load_stream(p + i + 2 * stride), d = dev::load_stream(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        const uint4 a = dev::load_stream(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

inline float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Bytes/s of one pass of the streaming read over a 4 GiB buffer (median of 9).
inline double measure_read_ceiling(int multiprocessors) {
    const size_t bytes = size_t{4} << 30;
    Buffer buf(bytes), sink(sizeof(uint32_t));
    Stream s;
    s.fill(buf.data(), 0x5a, bytes);
    const unsigned blocks = static_cast<unsigned>(multiprocessors) * 8;
    auto launch = [&] {
        stream_read_kernel<<<dim3(blocks), dim3(256), 0, static_cast<hipStream_t>(s.handle())>>>(
            buf.as<uint4>(), bytes / 16, sink.as<uint32_t>());
        AFF_GPU_CHECK(hipGetLastError());
    };
    for (int i = 0; i < 3; ++i) launch();
    std::vector<float> ms;
    for (int r = 0; r < 9; ++r) {
        Event a, b;
        a.record(s);
        launch();
        b.record(s);
        b.synchronize();
        ms.push_back(b.ms_since(a));
    }
    return static_cast<double>(bytes) / (median(ms) * 1e-3);
}

struct Result {
    double bytes = 0.0;
    double graph_s = 0.0;  // per launch, graph replay
    double loop_s = 0.0;   // per launch, plain stream launches
};

// Per-launch time of `launch(i)` (i cycles over the weight copies): plain stream launches,
// then a captured graph of the same launches.
template <class Launch>
Result measure(int copies, const Stream& s, Launch&& launch_on) {
    auto launch = [&](int i) { launch_on(i, s); };
    const int per_graph = std::max(copies, 64);
    for (int i = 0; i < copies; ++i) launch(i);  // warm-up
    s.synchronize();
    Result r;
    std::vector<float> ms;
    for (int rep = 0; rep < 7; ++rep) {
        Event a, b;
        a.record(s);
        for (int i = 0; i < per_graph; ++i) launch(i);
        b.record(s);
        b.synchronize();
        ms.push_back(b.ms_since(a));
    }
    r.loop_s = median(ms) * 1e-3 / per_graph;
    const auto hs = static_cast<hipStream_t>(s.handle());
    hipGraph_t graph = nullptr;
    hipGraphExec_t exec = nullptr;
    AFF_GPU_CHECK(hipStreamBeginCapture(hs, hipStreamCaptureModeThreadLocal));
    for (int i = 0; i < per_graph; ++i) launch(i);
    AFF_GPU_CHECK(hipStreamEndCapture(hs, &graph));
    AFF_GPU_CHECK(hipGraphInstantiateWithFlags(&exec, graph, 0));
    AFF_GPU_CHECK(hipGraphLaunch(exec, hs));  // warm-up
    ms.clear();
    for (int rep = 0; rep < 7; ++rep) {
        Event a, b;
        a.record(s);
        AFF_GPU_CHECK(hipGraphLaunch(exec, hs));
        b.record(s);
        b.synchronize();
        ms.push_back(b.ms_since(a));
    }
    AFF_GPU_CHECK(hipGraphExecDestroy(exec));
    AFF_GPU_CHECK(hipGraphDestroy(graph));
    r.graph_s = median(ms) * 1e-3 / per_graph;
    return r;
}


// The read-only kernel over one weight copy per launch: the best a single launch of this
// many bytes does with nothing but loads.
inline Result measure_read(std::vector<Buffer>& weights, int multiprocessors, Buffer& sink) {
    Stream s;
    const size_t n16 = weights[0].size() / 16;
    const unsigned blocks = static_cast<unsigned>(
        std::min<size_t>(static_cast<size_t>(multiprocessors) * 8, (n16 + 1023) / 1024));
    Result r = measure(static_cast<int>(weights.size()), s, [&](int i, const Stream& st) {
        stream_read_kernel<<<dim3(blocks), dim3(256), 0, static_cast<hipStream_t>(st.handle())>>>(
            weights[i % weights.size()].as<uint4>(), n16, sink.as<uint32_t>());
        AFF_GPU_CHECK(hipGetLastError());
    });
    r.bytes = static_cast<double>(weights[0].size());
    return r;
}

}  // namespace aff::gpu::bench
