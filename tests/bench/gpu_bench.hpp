// What the GPU benchmarks (tests/bench/*_bench.hip) share: the HBM read ceiling measured in
// the same run by the streaming read (kernels/stream_read.hpp: the bound every figure is
// divided by), the per-launch timer (plain stream launches and a captured graph of back-to-back launches,
// median of 7) and the read-only reference of one launch's bytes. Header-only, one per bench
// executable.
#pragma once

#include "kernels/check.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/device_common.hpp"
#include "kernels/stream_read.hpp"
#include "libaff/gpu/read_ceiling.hpp"

#include <algorithm>
#include <vector>

namespace aff::gpu::bench {

inline float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
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
        stream_read(weights[i % weights.size()].data(), n16, sink.as<uint32_t>(), blocks, st.handle());
    });
    r.bytes = static_cast<double>(weights[0].size());
    return r;
}

}  // namespace aff::gpu::bench
