// Benchmark: codebook-expert GEMV (kernels/moe_gemv.hip) at the V4-Flash routed-expert shapes
// (w1/w3 2048 × 4096, w2 4096 × 2048), batch 1 and 4, one expert and 6 experts per launch, as
// effective bytes/s (92 bytes per 256 weights + activations + outputs, each counted once; the
// 16 KiB codebook is not counted) over the HBM read ceiling measured in the same run by a
// streaming read kernel (gpu_bench.hpp). Expert weights rotate over copies spanning 1 GiB,
// far beyond the L2, so every launch reads HBM; timing as fp8_gemv_bench (captured graph of
// back-to-back launches, median of 7 replays). Per shape and expert count a read-only kernel
// streaming the same weight bytes per launch shows what one launch of that size reaches.
// Then the forward's own pattern for one layer's routed experts (libaff/gpu/forward_moe.cpp,
// routed_codebook; each expert one extent, found through the expert table): moe_gemv_routed over w1 and w3 in one launch, the SwiGLU, moe_gemv_routed
// over w2, for 1 and 4 tokens routed by 6 distinct random experts each out of 256 (a V4-Flash
// layer: 2.3 GB of experts, new ids every step); bytes = the distinct experts' weights +
// activations in and out of each GEMV, time = the three launches (SwiGLU included).
// Random index bits, bf16 scales in [2^-7, 2^-6), a random codebook of fp16 values in
// ±[2^-4, 2^0) (speed does not depend on the values; this file is CUDA C++17, which cannot
// include the C++20 codebook header). The last three lines
// are the figure, the bound and the ratio of the default tuning (tests/bench/RESULTS.md).
// The kernel runs with items of 8 rows (the default) and 4 (the previous default) in both parts.
#include "kernels/check.hpp"
#include "libaff/gpu/device.hpp"
#include "gpu_bench.hpp"
#include "kernels/device_common.hpp"
#include "kernels/moe_gemv.hpp"
#include "kernels/swiglu.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace aff::gpu;
using namespace aff::gpu::bench;

constexpr size_t kBlockBytes = 92;

// Random index bytes from a hash of the index; bytes 90..91 of every block hold a bf16 scale
// 0x3cXX (the buffer starts at a block boundary, blocks follow each other).
__global__ void fill_blocks_kernel(uint8_t* p, size_t n, uint32_t seed) {
    const size_t i = static_cast<size_t>(blockIdx.x) * 256 + threadIdx.x;
    if (i >= n) return;
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85ebca6bu;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    const size_t at = i % kBlockBytes;
    p[i] = at == 91 ? 0x3c : static_cast<uint8_t>(h >> 8);
}

struct Shape {
    const char* name;
    int n, k;
};

}  // namespace

int main(int argc, char** argv) {
    try {
        use_device(select_devices(1)[0]);
        const DeviceInfo info = device_info(0);
        std::printf("device: %s, %d multiprocessors, L2 %.0f MiB\n", info.name.c_str(), info.multiprocessors,
                    info.l2_bytes / 1048576.0);
        const double ceiling = measure_read_ceiling(info.multiprocessors);
        std::printf("HBM read ceiling (streaming read, 4 GiB): %.3f TB/s\n", ceiling / 1e12);

        std::vector<uint16_t> values(4096 * 2);
        std::mt19937 cb_rng(777);
        for (uint16_t& v : values) v = static_cast<uint16_t>(0x2c00u + (cb_rng() & 0x8fffu));
        Buffer codebook(values.size() * 2);
        upload(codebook, values.data(), values.size() * 2);
        const uint16_t* cb = codebook.as<uint16_t>();
        const Shape shapes[] = {{"w1/w3", 2048, 4096}, {"w2", 4096, 2048}};
        struct Variant {
            const char* name;
            MoeGemvTuning tuning;
        };
        // r8/r4: rows per work item (item_rows); "r4 dep" is the previous default.
        const Variant variants[] = {{"r8 dep", {528, true, 8}},
                                    {"r8", {528, false, 8}},
                                    {"r4 dep", {528, true, 4}},
                                    {"r4", {528, false, 4}}};
        constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
        int default_variant = 0;
        for (int v = 0; v < kVariants; ++v)
            if (variants[v].tuning.target_blocks == kMoeGemvDefault.target_blocks &&
                variants[v].tuning.dependent_launch == kMoeGemvDefault.dependent_launch &&
                variants[v].tuning.item_rows == kMoeGemvDefault.item_rows)
                default_variant = v;
        // [variant][experts 1 / 6][batch 1 / 4]
        double total_bytes[kVariants][2][2] = {}, total_time[kVariants][2][2] = {};
        Buffer sink(sizeof(uint32_t));
        std::mt19937 rng(12345);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::printf("%-6s %10s %7s %5s %-14s %10s %8s %8s %10s\n", "shape", "n x k", "experts", "batch", "tuning",
                    "graph us", "TB/s", "ceiling", "loop us");
        // "layer": only the forward's per-layer pattern (a short run for a profiler).
        const bool layer_only = argc > 1 && std::string(argv[1]) == "layer";
        for (const Shape& sh : shapes) {
            if (layer_only) break;
            const size_t expert_bytes = static_cast<size_t>(sh.n) * (sh.k / 256) * kBlockBytes;
            const int copies = static_cast<int>((size_t{1} << 30) / expert_bytes);  // one GiB of experts
            Buffer weights(static_cast<size_t>(copies) * expert_bytes);
            Stream s;
            fill_blocks_kernel<<<dim3(static_cast<unsigned>((weights.size() + 255) / 256)), dim3(256), 0,
                                 static_cast<hipStream_t>(s.handle())>>>(weights.as<uint8_t>(), weights.size(), 0x1234u);
            AFF_GPU_CHECK(hipGetLastError());
            constexpr int kMaxExperts = 6;
            std::vector<float> xv(static_cast<size_t>(kMoeGemvMaxBatch) * sh.k * kMaxExperts);
            for (float& v : xv) v = nd(rng);
            Buffer x(xv.size() * 4), y(static_cast<size_t>(kMoeGemvMaxBatch) * sh.n * kMaxExperts * 4);
            upload(x, xv.data(), xv.size() * 4);
            s.synchronize();
            for (const int experts : {1, kMaxExperts}) {
                const int launches = copies / experts;  // distinct weight sets before repeating
                // Read-only kernel over the same weight bytes per launch.
                {
                    const size_t n16 = expert_bytes * experts / 16;
                    const unsigned blocks = static_cast<unsigned>(
                        std::min<size_t>(static_cast<size_t>(info.multiprocessors) * 8, (n16 + 1023) / 1024));
                    const Result rd = measure(launches, s, [&](int i, const Stream& st) {
                        const auto* p = weights.as<uint8_t>() + static_cast<size_t>(i % launches) * experts * expert_bytes;
                        stream_read(p, n16, sink.as<uint32_t>(), blocks, st.handle());
                    });
                    const double bytes = static_cast<double>(expert_bytes) * experts;
                    std::printf("%-6s %5dx%-4d %7d %5s %-14s %10.2f %8.3f %7.1f%% %10.2f\n", sh.name, sh.n, sh.k, experts,
                                "-", "read-only", rd.graph_s * 1e6, bytes / rd.graph_s / 1e12,
                                100.0 * bytes / rd.graph_s / ceiling, rd.loop_s * 1e6);
                }
                for (const int batch : {1, 4}) {
                    for (int v = 0; v < kVariants; ++v) {
                        const Result r = measure(launches, s, [&](int i, const Stream& st) {
                            MoeGemvJob jobs[kMaxExperts];
                            for (int e = 0; e < experts; ++e) {
                                jobs[e].w = weights.as<uint8_t>() +
                                            (static_cast<size_t>(i % launches) * experts + e) * expert_bytes;
                                jobs[e].x = x.as<float>() + static_cast<size_t>(e) * kMoeGemvMaxBatch * sh.k;
                                jobs[e].y = y.as<float>() + static_cast<size_t>(e) * kMoeGemvMaxBatch * sh.n;
                            }
                            moe_gemv_tuned(jobs, experts, sh.n, sh.k, batch, cb, variants[v].tuning,
                                           st.handle());
                        });
                        const double bytes = experts * (static_cast<double>(expert_bytes) +
                                                        static_cast<double>(batch) * sh.k * 4 +
                                                        static_cast<double>(batch) * sh.n * 4);
                        const double rate = bytes / r.graph_s;
                        std::printf("%-6s %5dx%-4d %7d %5d %-14s %10.2f %8.3f %7.1f%% %10.2f\n", sh.name, sh.n, sh.k,
                                    experts, batch, variants[v].name, r.graph_s * 1e6, rate / 1e12,
                                    100.0 * rate / ceiling, r.loop_s * 1e6);
                        total_bytes[v][experts > 1][batch == 4] += bytes;
                        total_time[v][experts > 1][batch == 4] += r.graph_s;
                    }
                }
            }
        }
        auto rate = [&](int v, int e, int b) { return total_bytes[v][e][b] / total_time[v][e][b]; };
        for (int v = 0; v < kVariants; ++v)
            for (int e = 0; e < 2; ++e)
                std::printf("summary %-14s experts %d: batch 1 %.3f TB/s (%.1f%%), batch 4 %.3f TB/s (%.1f%%)\n",
                            variants[v].name, e ? 6 : 1, rate(v, e, 0) / 1e12, 100.0 * rate(v, e, 0) / ceiling,
                            rate(v, e, 1) / 1e12, 100.0 * rate(v, e, 1) / ceiling);

        // The forward's pattern for one layer (routed_codebook): 256 experts of each matrix.
        constexpr int kExperts = 256, kTopK = 6, kSteps = 64, D = 4096, I = 2048;
        const size_t w13_bytes = static_cast<size_t>(I) * (D / 256) * kBlockBytes;
        const size_t w2_bytes = static_cast<size_t>(D) * (I / 256) * kBlockBytes;
        // Each expert one extent, w1, w2, w3 one after another (the forward's layout), found
        // through the expert table.
        const size_t extent_bytes = 2 * w13_bytes + w2_bytes;
        const unsigned long long at_w1 = 0, at_w2 = w13_bytes, at_w3 = w13_bytes + w2_bytes;
        Buffer extents(extent_bytes * kExperts);
        {
            Stream s;
            fill_blocks_kernel<<<dim3(static_cast<unsigned>((extents.size() + 255) / 256)), dim3(256), 0,
                                 static_cast<hipStream_t>(s.handle())>>>(extents.as<uint8_t>(), extents.size(), 0x777u);
            AFF_GPU_CHECK(hipGetLastError());
            s.synchronize();
        }
        std::vector<const uint8_t*> slots(kExperts);
        for (int e = 0; e < kExperts; ++e) slots[e] = extents.as<uint8_t>() + static_cast<size_t>(e) * extent_bytes;
        Buffer table(slots.size() * sizeof(slots[0]));
        upload(table, slots.data(), table.size());
        std::vector<float> av(static_cast<size_t>(kMoeGemvMaxBatch) * D);
        for (float& v : av) v = nd(rng);
        Buffer a(av.size() * 4), g1(static_cast<size_t>(kMoeGemvMaxBatch) * kTopK * I * 4),
            g3(g1.size()), routed(static_cast<size_t>(kMoeGemvMaxBatch) * kTopK * D * 4);
        upload(a, av.data(), av.size() * 4);
        // The forward's pattern per kernel variant (fused w1+w3 unless said otherwise).
        struct Run {
            const char* name;
            MoeGemvTuning tuning;
            bool fused;
        };
        const Run runs[] = {{"r8 (default)", kMoeGemvDefault, true},
                            {"r4 (before)", {528, true, 4}, true},
                            {"r8, w1 w3 separate", kMoeGemvDefault, false}};
        constexpr int kRuns = sizeof(runs) / sizeof(runs[0]);
        double layer_rate[kRuns][2] = {};  // [run][1 token, 4 tokens]
        for (const int tokens : {1, kMoeGemvMaxBatch}) {
            // kSteps id sets: each token 6 distinct experts; bytes count each distinct expert once.
            std::vector<int32_t> ids(static_cast<size_t>(kSteps) * tokens * kTopK);
            std::vector<double> step_bytes(kSteps);
            std::vector<int> order(kExperts);
            double distinct_sum = 0.0;
            for (int st = 0; st < kSteps; ++st) {
                std::vector<char> used(kExperts, 0);
                int distinct = 0;
                for (int t = 0; t < tokens; ++t) {
                    for (int e = 0; e < kExperts; ++e) order[e] = e;
                    for (int j = 0; j < kTopK; ++j) {
                        std::uniform_int_distribution<int> pick(j, kExperts - 1);
                        std::swap(order[j], order[pick(rng)]);
                        const int e = order[j];
                        ids[(static_cast<size_t>(st) * tokens + t) * kTopK + j] = e;
                        distinct += used[e] == 0;
                        used[e] = 1;
                    }
                }
                const int pairs = tokens * kTopK;
                step_bytes[st] = distinct * (2.0 * w13_bytes + w2_bytes) +
                                 4.0 * (static_cast<double>(tokens) * D + 2.0 * pairs * I) +
                                 4.0 * (static_cast<double>(pairs) * I + static_cast<double>(pairs) * D);
                distinct_sum += distinct;
            }
            Buffer dids(ids.size() * 4);
            upload(dids, ids.data(), ids.size() * 4);
            double bytes_sum = 0.0;
            for (double b : step_bytes) bytes_sum += b;
            Stream s;
            for (int ri = 0; ri < kRuns; ++ri) {
                const Run& run = runs[ri];
                const bool fused = run.fused;
                const Result r = measure(kSteps, s, [&](int i, const Stream& st) {
                    const int step = i % kSteps;
                    const int32_t* step_ids = dids.as<int32_t>() + static_cast<size_t>(step) * tokens * kTopK;
                    MoeGemvRouted up;
                    up.ids = step_ids;
                    up.tokens = tokens;
                    up.top_k = kTopK;
                    up.x = a.as<float>();
                    up.x_token_stride = D;
                    up.experts = table.as<const uint8_t*>();
                    up.experts_count = kExperts;
                    if (fused) {
                        up.matrices = 2;
                        up.offset[0] = at_w1;
                        up.offset[1] = at_w3;
                        up.y[0] = g1.as<float>();
                        up.y[1] = g3.as<float>();
                        moe_gemv_routed(up, I, D, cb, run.tuning, st.handle());
                    } else {
                        up.offset[0] = at_w1;
                        up.y[0] = g1.as<float>();
                        moe_gemv_routed(up, I, D, cb, run.tuning, st.handle());
                        up.offset[0] = at_w3;
                        up.y[0] = g3.as<float>();
                        moe_gemv_routed(up, I, D, cb, run.tuning, st.handle());
                    }
                    swiglu(g1.as<float>(), g3.as<float>(), static_cast<long long>(tokens) * kTopK * I, 10.0f,
                           g1.as<float>(), st.handle());
                    MoeGemvRouted down;
                    down.ids = step_ids;
                    down.tokens = tokens;
                    down.top_k = kTopK;
                    down.experts = table.as<const uint8_t*>();
                    down.experts_count = kExperts;
                    down.offset[0] = at_w2;
                    down.y[0] = routed.as<float>();
                    down.x = g1.as<float>();
                    down.x_token_stride = static_cast<long long>(kTopK) * I;
                    down.x_slot_stride = I;
                    moe_gemv_routed(down, D, I, cb, run.tuning, st.handle());
                });
                // Steps cycle through the id sets evenly, so mean bytes per step over the mean time.
                const double rate_l = bytes_sum / kSteps / r.graph_s;
                const double weights_per_s = distinct_sum / kSteps * 3.0 * D * I / r.graph_s;
                std::printf("layer %-32s tokens %d distinct experts %.2f, %.2f MB/step, %8.2f us/step, %.3f TB/s "
                            "(%.1f%%), %.2f T weights/s\n",
                            run.name, tokens, distinct_sum / kSteps,
                            bytes_sum / kSteps / 1e6, r.graph_s * 1e6, rate_l / 1e12, 100.0 * rate_l / ceiling,
                            weights_per_s / 1e12);
                layer_rate[ri][tokens > 1] = rate_l;
            }
        }

        const int d = default_variant;
        for (int ri = 0; ri < kRuns; ++ri)
            std::printf("summary layer %-32s 1 token %.3f TB/s (%.1f%%), 4 tokens %.3f TB/s (%.1f%%)\n", runs[ri].name,
                        layer_rate[ri][0] / 1e12, 100.0 * layer_rate[ri][0] / ceiling, layer_rate[ri][1] / 1e12,
                        100.0 * layer_rate[ri][1] / ceiling);
        // runs[0] is the default tuning, runs[1] the kernel before this version.
        std::printf("figure: moe_gemv, the forward's per-layer pattern (w1+w3 launch, SwiGLU, w2 launch; graph replay), "
                    "default (%s): 1 token %.3f TB/s, 4 tokens %.3f TB/s (before: %.3f / %.3f TB/s); per launch "
                    "(6 experts, w1/w3 + w2) batch 1 %.3f, batch 4 %.3f TB/s\n",
                    variants[d].name, layer_rate[0][0] / 1e12, layer_rate[0][1] / 1e12, layer_rate[1][0] / 1e12,
                    layer_rate[1][1] / 1e12, rate(d, 1, 0) / 1e12, rate(d, 1, 1) / 1e12);
        std::printf("bound: HBM read ceiling measured in this run: %.3f TB/s\n", ceiling / 1e12);
        std::printf("ratio: per layer 1 token %.1f%%, 4 tokens %.1f%% (before %.1f%% / %.1f%%); per launch 6 experts "
                    "batch 1 %.1f%%, batch 4 %.1f%% of the ceiling (goal >= 80%%)\n",
                    100.0 * layer_rate[0][0] / ceiling, 100.0 * layer_rate[0][1] / ceiling,
                    100.0 * layer_rate[1][0] / ceiling, 100.0 * layer_rate[1][1] / ceiling,
                    100.0 * rate(d, 1, 0) / ceiling, 100.0 * rate(d, 1, 1) / ceiling);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "moe_gemv_bench: %s\n", e.what());
        return 1;
    }
}
