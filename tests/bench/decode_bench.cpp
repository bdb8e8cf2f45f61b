// Benchmark 2: GPU decode at DeepSeek-V4-Flash's real geometry (issue 6), batch 1 and 4. Input:
// a container of the real per-layer shapes with synthetic weights, made on the device machine
// by make_geometry_container (tests/bench/make_geometry_container.cpp) with a few layers. The
// model is loaded once; GpuModel::set_max_layers runs prefixes of 0 .. N layers, so a layer's
// time is the difference of two prefixes' step times (graph replay, wall clock of a whole
// decode call: token and position upload, the replay, the logits download). The 43-layer
// step is extrapolated from the per-kind layer times with V4-Flash's composition (model doc
// §1.2: 2 sliding, 21 CSA, 20 HCA layers) plus the zero-layer step (embedding, hyper head,
// final norm, head). The bound: the bytes a step must read (GpuModel::decode_read_bytes: every
// weight of each layer but its routed experts, 6 routed experts a sequence, the head; plus
// decode_state_read_bytes, the attention state at the measured position) over the HBM read
// ceiling measured in the same run (kernels/stream_read.hpp). A timed non-graph pass
// (GpuModel::profile_decode) breaks the step down by op class. The last three lines are
// figure, bound and ratio (tests/bench/RESULTS.md).
// With GPUS 2 or more the layers are split across that many devices (the bound stays one
// device's HBM ceiling: the devices run one after another).
// Then the cost of recording a route trace (--route-trace: GpuModel::set_route_observer with
// the RouteRecorder aff-run uses): every layer, batch 1 and 4, rounds of STEPS calls without
// and with the recorder taking turns (the order alternating each round), the median of each;
// printed per round, then the mean and spread of the rounds and the ratio with / without
// against its bound (goal <= 1.02). With a fourth argument `trace` only this part runs.
//     decode_bench CONTAINER.aff [STEPS] [GPUS] [trace]   (STEPS timed decode calls per point, default 24)
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "kernels/stream_read.hpp"
#include "libaff/gpu/read_ceiling.hpp"
#include "libaff/trace/recorder.hpp"
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "decode_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using aff::AttentionKind;

constexpr int kPrompt = 16;            // tokens prefilled per sequence before the timed steps

using aff::gpu::bench::median;

constexpr int kTraceRounds = 8;
constexpr double kTraceBound = 1.02;

// Recording's cost over every layer: rounds of `steps` calls without and with the recorder,
// alternating which goes first; returns the mean ratio with / without.
double route_trace_cost(aff::gpu::GpuModel& g, const std::string& path, std::vector<aff::gpu::GpuDecodeState*>& ptrs,
                        const std::vector<std::int32_t>& next, int B, int steps) {
    using namespace aff::gpu;
    g.set_max_layers(-1);
    const std::span<GpuDecodeState* const> seqs(ptrs.data(), B);
    const std::span<const std::int32_t> toks(next.data(), B);
    const std::string file = (std::filesystem::temp_directory_path() / "decode_bench_route_trace.aft").string();
    aff::trace::RouteRecorder rec(file, aff::trace::trace_header_for(g.config(), path));
    std::vector<std::uint32_t> ids(B);
    for (int i = 0; i < B; ++i) ids[i] = std::uint32_t(i);
    auto round = [&](bool record) {
        g.set_route_observer(record ? &rec : nullptr);
        for (int w = 0; w < 2; ++w) g.decode(seqs, toks);  // capture (the first time), warm-up
        std::vector<double> ms;
        for (int s = 0; s < steps; ++s) {
            const auto a = std::chrono::steady_clock::now();
            if (record) rec.begin(ids, aff::trace::Phase::decode);
            g.decode(seqs, toks);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
        }
        g.set_route_observer(nullptr);
        return median(ms);
    };
    std::vector<double> off, on, ratio;
    std::printf("\nroute trace cost, batch %d, %d layers (graph replay, median of %d calls a round):\n", B,
                g.config().num_layers, steps);
    for (int r = 0; r < kTraceRounds; ++r) {
        double a = 0, b = 0;
        if (r % 2 == 0) {
            a = round(false);
            b = round(true);
        } else {
            b = round(true);
            a = round(false);
        }
        off.push_back(a);
        on.push_back(b);
        ratio.push_back(b / a);
        std::printf("  round %d: without %.3f ms, with %.3f ms, ratio %.4f\n", r + 1, a, b, b / a);
    }
    auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return s / double(v.size());
    };
    auto spread = [](const std::vector<double>& v) {
        return *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
    };
    std::printf("route trace cost, batch %d: without %.3f ms a step (spread %.3f), with %.3f ms (spread %.3f), "
                "ratio %.4f (rounds %.4f .. %.4f; %llu steps recorded)\n",
                B, mean(off), spread(off), mean(on), spread(on), mean(ratio),
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()),
                static_cast<unsigned long long>(rec.steps()));
    rec.publish();  // as aff-run does at the end: the trace must be whole
    std::filesystem::remove(file);
    return mean(ratio);
}


}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: decode_bench CONTAINER.aff [STEPS] [GPUS] [trace]\n");
        return 2;
    }
    try {
        using namespace aff::gpu;
        const std::string path = argv[1];
        const int steps = argc > 2 ? std::max(3, std::atoi(argv[2])) : 24;
        const bool trace_only = argc > 4 && std::strcmp(argv[4], "trace") == 0;
        if (argc > 4 && !trace_only) throw std::runtime_error(std::string("the fourth argument must be `trace`, not ") + argv[4]);
        const DeviceInfo info = bench::open_bench_device();
        const double ceiling = measure_read_ceiling(info.multiprocessors);
        std::printf("HBM read ceiling (streaming read, 4 GiB): %.3f TB/s\n", ceiling / 1e12);

        aff::ThreadPool pool(0);
        const int gpus = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;
        const bench::BenchModel model = bench::load_bench_model(path, pool, 4096, gpus);
        GpuModel& g = *model.gpu;
        const aff::ModelConfig& c = g.config();
        const int L = c.num_layers;

        bench::DecodeBatch batch(g, kPrompt);
        std::vector<GpuDecodeState>& states = batch.states;
        std::vector<GpuDecodeState*>& ptrs = batch.ptrs;
        const std::vector<std::int32_t>& next = batch.next;
        // ms of one decode call of B sequences over `layers` layers (median of `steps`).
        auto step_ms = [&](int B, int layers) {
            g.set_max_layers(layers);
            return batch.step_ms(g, B, steps, 3);  // 3 untimed: the capture, warm-up
        };

        auto trace_cost = [&] {
            const double r1 = route_trace_cost(g, path, ptrs, next, 1, steps);
            const double r4 = route_trace_cost(g, path, ptrs, next, kDecodeBatchMax, steps);
            std::printf("\nfigure: route trace recording, decode step with / without (%d layers): batch 1 %.4f, batch 4 %.4f\n",
                        L, r1, r4);
            std::printf("bound: %.2f (recording costs at most 2 %% of decode time)\n", kTraceBound);
            std::printf("ratio: batch 1 %.4f, batch 4 %.4f (goal <= %.2f)\n", r1 / kTraceBound, r4 / kTraceBound, 1.0);
        };
        if (trace_only) {
            trace_cost();
            return 0;
        }

        struct Outcome {
            double step_ms = 0, floor_ms = 0, bytes = 0;
        };
        Outcome result[2];
        const int batches[2] = {1, kDecodeBatchMax};
        for (int bi = 0; bi < 2; ++bi) {
            const int B = batches[bi];
            std::vector<double> t(L + 1);
            std::vector<double> bytes(L + 1);
            for (int l = 0; l <= L; ++l) {
                t[l] = step_ms(B, l);
                g.set_max_layers(l);
                bytes[l] = double(g.decode_read_bytes(B)) + double(B) * double(g.decode_state_read_bytes(states[0].position));
            }
            std::printf("\nbatch %d (position ~%lld): step time of the first N layers (graph replay, median of %d)\n", B,
                        static_cast<long long>(states[0].position), steps);
            std::printf("%-7s %-8s %10s %10s %10s %8s\n", "layers", "kind", "step ms", "layer ms", "layer MB", "floor ms");
            std::printf("%-7d %-8s %10.3f %10s %10.1f %8.3f\n", 0, "head", t[0], "-", bytes[0] / 1e6, bytes[0] / ceiling * 1e3);
            for (int l = 0; l < L; ++l) {
                const double ms = t[l + 1] - t[l], by = bytes[l + 1] - bytes[l];
                std::printf("%-7d %-8s %10.3f %10.3f %10.1f %8.3f\n", l + 1, bench::kind_name(c.attention[l]), t[l + 1],
                            ms, by / 1e6, by / ceiling * 1e3);
            }
            const std::array<double, 3> kind_ms = bench::per_kind_layer_mean(c, t),
                                        kind_bytes = bench::per_kind_layer_mean(c, bytes);
            double est = t[0], est_bytes = bytes[0];
            for (int k = 0; k < 3; ++k) {
                std::printf("%-8s layer: %.3f ms (floor %.3f ms, %.1f MB), x %d in V4-Flash\n",
                            bench::kind_name(static_cast<AttentionKind>(k)), kind_ms[k], kind_bytes[k] / ceiling * 1e3,
                            kind_bytes[k] / 1e6, bench::kFlashLayers[k]);
                est += bench::kFlashLayers[k] * kind_ms[k];
                est_bytes += bench::kFlashLayers[k] * kind_bytes[k];
            }
            result[bi] = {est, est_bytes / ceiling * 1e3, est_bytes};
            std::printf("batch %d, 43 layers + head (extrapolated): %.3f ms a step (%.1f tok/s), floor %.3f ms (%.2f GB), "
                        "ratio %.2f\n",
                        B, est, B * 1e3 / est, result[bi].floor_ms, est_bytes / 1e9, est / result[bi].floor_ms);

            // Where the time goes: the same step, launches one by one, timed per op class.
            g.set_max_layers(-1);
            const GpuStepProfile p = g.profile_decode(std::span<GpuDecodeState* const>(ptrs.data(), B),
                                                      std::span<const std::int32_t>(next.data(), B));
            const double graph_all = t[L];
            std::printf("batch %d breakdown over %d layers + head (non-graph, timed per class: %.3f ms vs graph %.3f ms)\n",
                        B, L, p.total_ms, graph_all);
            for (const auto& [what, ms] : p.classes)
                std::printf("  %-32s %8.3f ms %5.1f %%\n", what.c_str(), ms, 100.0 * ms / p.total_ms);
        }
        std::printf("\nfigure: V4-Flash decode step, 43 layers + head (extrapolated from %d layers, graph replay): "
                    "batch 1 %.3f ms (%.1f tok/s), batch 4 %.3f ms (%.1f tok/s)\n",
                    L, result[0].step_ms, 1e3 / result[0].step_ms, result[1].step_ms, 4e3 / result[1].step_ms);
        std::printf("bound: bytes a step must read / read ceiling %.3f TB/s: batch 1 %.3f ms (%.2f GB), batch 4 %.3f ms "
                    "(%.2f GB)\n",
                    ceiling / 1e12, result[0].floor_ms, result[0].bytes / 1e9, result[1].floor_ms, result[1].bytes / 1e9);
        std::printf("ratio: batch 1 %.2f, batch 4 %.2f (goal <= 1.3)\n", result[0].step_ms / result[0].floor_ms,
                    result[1].step_ms / result[1].floor_ms);
        trace_cost();
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "decode_bench: %s\n", e.what());
        return 1;
    }
}
#endif
