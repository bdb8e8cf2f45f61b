// Benchmark: codebook-expert GEMV (kernels/moe_gemv.hip) at the V4-Flash routed-expert shapes
// (w1/w3 2048 × 4096, w2 4096 × 2048), batch 1 and 4, one expert and 6 experts per launch, as
// effective bytes/s (92 bytes per 256 weights + activations + outputs, each counted once; the
// 16 KiB codebook is not counted) over the HBM read ceiling measured in the same run by a
// streaming read kernel (gpu_bench.hpp). Expert weights rotate over copies spanning 1 GiB,
// far beyond the L2, so every launch reads HBM; timing as fp8_gemv_bench (captured graph of
// back-to-back launches, median of 7 replays). Per shape and expert count a read-only kernel
// streaming the same weight bytes per launch shows what one launch of that size reaches.
// Random index bits, bf16 scales in [2^-7, 2^-6), a random codebook of fp16 values in
// ±[2^-4, 2^0) (speed does not depend on the values; this file is CUDA C++17, which cannot
// include the C++20 codebook header). The last three lines
// are the figure, the bound and the ratio of the default tuning (tests/bench/RESULTS.md).
#include "aff/gpu/check.hpp"
#include "aff/gpu/device.hpp"
#include "gpu_bench.hpp"
#include "kernels/device_common.hpp"
#include "kernels/moe_gemv.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
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

int main() {
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
        const Shape shapes[] = {{"w1/w3", 2048, 4096}, {"w2", 4096, 2048}};
        struct Variant {
            const char* name;
            MoeGemvTuning tuning;
        };
        const Variant variants[] = {{"blocks132 dep", {132, true}},
                                    {"blocks264 dep", {264, true}},
                                    {"blocks528 dep", {528, true}},
                                    {"blocks264", {264, false}}};
        constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
        int default_variant = 0;
        for (int v = 0; v < kVariants; ++v)
            if (variants[v].tuning.target_blocks == kMoeGemvDefault.target_blocks &&
                variants[v].tuning.dependent_launch == kMoeGemvDefault.dependent_launch)
                default_variant = v;
        // [variant][experts 1 / 6][batch 1 / 4]
        double total_bytes[kVariants][2][2] = {}, total_time[kVariants][2][2] = {};
        Buffer sink(sizeof(uint32_t));
        std::mt19937 rng(12345);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::printf("%-6s %10s %7s %5s %-14s %10s %8s %8s %10s\n", "shape", "n x k", "experts", "batch", "tuning",
                    "graph us", "TB/s", "ceiling", "loop us");
        for (const Shape& sh : shapes) {
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
                            moe_gemv_tuned(jobs, experts, sh.n, sh.k, batch, codebook.as<uint16_t>(), variants[v].tuning,
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
        const int d = default_variant;
        std::printf("figure: moe_gemv (default tuning: %s), w1/w3 + w2 (sum bytes / sum time, graph replay): "
                    "6 experts per launch batch 1 %.3f TB/s, batch 4 %.3f TB/s; 1 expert batch 1 %.3f TB/s, "
                    "batch 4 %.3f TB/s\n",
                    variants[d].name, rate(d, 1, 0) / 1e12, rate(d, 1, 1) / 1e12, rate(d, 0, 0) / 1e12,
                    rate(d, 0, 1) / 1e12);
        std::printf("bound: HBM read ceiling measured in this run: %.3f TB/s\n", ceiling / 1e12);
        std::printf("ratio: 6 experts batch 1 %.1f%%, batch 4 %.1f%%; 1 expert batch 1 %.1f%%, batch 4 %.1f%% of "
                    "the ceiling (goal >= 80%%)\n",
                    100.0 * rate(d, 1, 0) / ceiling, 100.0 * rate(d, 1, 1) / ceiling, 100.0 * rate(d, 0, 0) / ceiling,
                    100.0 * rate(d, 0, 1) / ceiling);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "moe_gemv_bench: %s\n", e.what());
        return 1;
    }
}
