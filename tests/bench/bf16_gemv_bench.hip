// Benchmark: decode BF16 GEMV (kernels/bf16_gemv.hip) at the forward's BF16 shapes, batch 1..4:
// the head (129280 × 4096, 1.06 GB, the largest read of a decode step), the router (256 ×
// 4096), a compressor's wkv/wgate (1024 and 512 × 4096) and the indexer's weights_proj (64 ×
// 4096), against dense_gemv (what the forward used before) and a read-only kernel of the same
// bytes. Figure: effective bytes/s (weights + activations + outputs, each counted once) over
// the HBM read ceiling measured in the same run. Weights rotate over enough copies to span 1
// GiB, so every launch reads HBM. Timing: events around a captured graph of back-to-back
// launches, median of 7 (tests/bench/gpu_bench.hpp). Every tuning of bf16_gemv is timed; the
// last three lines are the figure, the bound and the ratio of the default tuning on the head
// (tests/bench/RESULTS.md).
#include "kernels/check.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/bf16_gemv.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/device_common.hpp"
#include "gpu_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace aff::gpu;
using namespace aff::gpu::bench;

// BF16 bits of a small value from a hash of the index (exponent 2^-8 .. 2^-5, any sign).
__global__ void fill_bf16_kernel(uint16_t* p, size_t n, uint32_t seed) {
    const size_t i = static_cast<size_t>(blockIdx.x) * 256 + threadIdx.x;
    if (i >= n) return;
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85ebca6bu;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    const uint16_t sign = static_cast<uint16_t>((h >> 31) << 15);
    const uint16_t exponent = static_cast<uint16_t>((119 + ((h >> 7) & 3)) << 7);
    p[i] = static_cast<uint16_t>(sign | exponent | (h & 0x7f));
}

void fill_bf16(Buffer& b, uint32_t seed, const Stream& s) {
    const size_t n = b.size() / 2;
    fill_bf16_kernel<<<dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0,
                       static_cast<hipStream_t>(s.handle())>>>(b.as<uint16_t>(), n, seed);
    AFF_GPU_CHECK(hipGetLastError());
}

struct Shape {
    const char* name;
    int n, k;
};

struct Variant {
    const char* name;
    bool dense;  // dense_gemv (before)
    Bf16GemvTuning tuning;
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
        const Shape shapes[] = {{"head", 129280, 4096},      {"compressor", 1024, 4096}, {"compressor", 512, 4096},
                                {"router", 256, 4096},       {"index w", 64, 4096}};
        const Variant variants[] = {{"dense_gemv", true, {}},
                                    {"default", false, kBf16GemvDefault},
                                    {"rows8 u1", false, {8, 1, true}},
                                    {"rows8 u2", false, {8, 2, true}},
                                    {"rows4 u1", false, {4, 1, true}},
                                    {"rows4 u2", false, {4, 2, true}},
                                    {"rows2 u2", false, {2, 2, true}},
                                    {"rows1 u2", false, {1, 2, true}},
                                    {"default nodep", false, {0, 0, false}}};
        constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
        double head_rate[kVariants][kBf16GemvMaxBatch + 1] = {};
        double small_bytes[kVariants][kBf16GemvMaxBatch + 1] = {}, small_time[kVariants][kBf16GemvMaxBatch + 1] = {};
        Buffer sink(sizeof(uint32_t));
        std::mt19937 rng(12345);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::printf("%-11s %12s %5s %-14s %10s %8s %8s %10s\n", "shape", "n x k", "batch", "kernel", "graph us", "TB/s",
                    "ceiling", "loop us");
        for (const Shape& sh : shapes) {
            const size_t wbytes = static_cast<size_t>(sh.n) * sh.k * 2;
            const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / wbytes));
            std::vector<Buffer> weights;
            Stream s;
            for (int i = 0; i < copies; ++i) {
                weights.emplace_back(wbytes);
                fill_bf16(weights.back(), 0x1234u + i, s);
            }
            std::vector<float> xv(static_cast<size_t>(kBf16GemvMaxBatch) * sh.k);
            for (float& v : xv) v = nd(rng);
            Buffer x(xv.size() * 4), y(static_cast<size_t>(kBf16GemvMaxBatch) * sh.n * 4);
            upload(x, xv.data(), xv.size() * 4);
            s.synchronize();
            const Result rd = measure_read(weights, info.multiprocessors, sink);
            std::printf("%-11s %6dx%-5d %5s %-14s %10.2f %8.3f %7.1f%% %10.2f\n", sh.name, sh.n, sh.k, "-", "read-only",
                        rd.graph_s * 1e6, rd.bytes / rd.graph_s / 1e12, 100.0 * rd.bytes / rd.graph_s / ceiling,
                        rd.loop_s * 1e6);
            for (int batch = 1; batch <= kBf16GemvMaxBatch; ++batch)
                for (int v = 0; v < kVariants; ++v) {
                    const Variant& var = variants[v];
                    Stream st0;
                    Result r = measure(copies, st0, [&](int i, const Stream& st) {
                        const Buffer& w = weights[i % weights.size()];
                        if (var.dense)
                            dense_gemv(w.data(), DenseType::bf16, sh.n, sh.k, x.as<float>(), sh.k, batch, y.as<float>(),
                                       sh.n, st.handle());
                        else
                            bf16_gemv(w.as<uint16_t>(), sh.n, sh.k, x.as<float>(), sh.k, batch, y.as<float>(), sh.n,
                                      st.handle(), var.tuning);
                    });
                    r.bytes = static_cast<double>(wbytes) + 4.0 * batch * (sh.k + sh.n);
                    const double rate = r.bytes / r.graph_s;
                    std::printf("%-11s %6dx%-5d %5d %-14s %10.2f %8.3f %7.1f%% %10.2f\n", sh.name, sh.n, sh.k, batch,
                                var.name, r.graph_s * 1e6, rate / 1e12, 100.0 * rate / ceiling, r.loop_s * 1e6);
                    if (sh.n == 129280) {
                        head_rate[v][batch] = rate;
                    } else {
                        small_bytes[v][batch] += r.bytes;
                        small_time[v][batch] += r.graph_s;
                    }
                }
        }
        for (int v = 0; v < kVariants; ++v) {
            std::printf("summary %-14s head", variants[v].name);
            for (int b = 1; b <= kBf16GemvMaxBatch; ++b) std::printf(" b%d %.1f%%", b, 100.0 * head_rate[v][b] / ceiling);
            std::printf("; small shapes (sum bytes / sum time)");
            for (int b = 1; b <= kBf16GemvMaxBatch; ++b)
                std::printf(" b%d %.1f%%", b, 100.0 * small_bytes[v][b] / small_time[v][b] / ceiling);
            std::printf("\n");
        }
        const double head_bytes = 129280.0 * 4096 * 2;
        std::printf("figure: bf16_gemv (default tuning) on the head 129280 x 4096: batch 1 %.3f TB/s (%.3f ms), batch 4 "
                    "%.3f TB/s (%.3f ms); dense_gemv before: batch 1 %.3f TB/s, batch 4 %.3f TB/s\n",
                    head_rate[1][1] / 1e12, head_bytes / head_rate[1][1] * 1e3, head_rate[1][4] / 1e12,
                    head_bytes / head_rate[1][4] * 1e3, head_rate[0][1] / 1e12, head_rate[0][4] / 1e12);
        std::printf("bound: HBM read ceiling measured in this run: %.3f TB/s\n", ceiling / 1e12);
        std::printf("ratio: head batch 1 %.1f%%, batch 4 %.1f%%; small shapes batch 1 %.1f%%, batch 4 %.1f%% of the "
                    "ceiling (goal >= 85%% on the head)\n",
                    100.0 * head_rate[1][1] / ceiling, 100.0 * head_rate[1][4] / ceiling,
                    100.0 * small_bytes[1][1] / small_time[1][1] / ceiling,
                    100.0 * small_bytes[1][4] / small_time[1][4] / ceiling);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bf16_gemv_bench: %s\n", e.what());
        return 1;
    }
}
