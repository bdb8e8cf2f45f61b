// Benchmark: decode FP8 GEMV (kernels/fp8_gemv.hip) at V4-Flash projection shapes, batch 1
// and 4, as effective bytes/s (weights + scales + activations + outputs, each counted once)
// over the HBM read ceiling measured in the same run by a streaming read kernel. Weights
// rotate over enough copies to be several times the L2, so every launch reads from HBM.
// Timing: CUDA/HIP events around a captured graph of back-to-back launches (as decode will
// run), median of several replays; plain stream launches are shown beside it. Every tuning
// of fp8_gemv_tuned is timed, and per shape a read-only kernel streaming the same bytes per
// launch shows what a single launch of that size can reach. Random FP8 bytes (no NaN codes)
// and E8M0 scales; never zeros. Then one layer's FP8 projections as the forward
// (libaff/gpu/forward_*.cpp) launches them, back to back: wq_a, wkv, wq_b, wo_a, wo_b, shared
// w1, w3, w2 (the indexer's and compressors' projections left out) in three ways: the forward
// now (wq_a + wkv and shared w1 + w3 each one fp8_gemv_multi launch, wo_a the G = 8 grouped
// launch of fp8_gemv_layout), each matrix its own launch (the forward before fp8_gemv_multi),
// and wo_a as the 8 × batch launches the forward made before that. The last three lines are
// the figure, the bound and the ratio of the default tuning (tests/bench/RESULTS.md).
#include "kernels/check.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/device_common.hpp"
#include "kernels/fp8_gemv.hpp"
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

// Random bytes from a hash of the index; NaN codes (0x7f, 0xff) become 0x7e, 0xfe.
__global__ void fill_fp8_kernel(uint8_t* p, size_t n, uint32_t seed) {
    const size_t i = static_cast<size_t>(blockIdx.x) * 256 + threadIdx.x;
    if (i >= n) return;
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85ebca6bu;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    uint8_t b = static_cast<uint8_t>(h >> 8);
    if ((b & 0x7f) == 0x7f) b ^= 1;
    p[i] = b;
}

void fill_fp8(Buffer& b, uint32_t seed, const Stream& s) {
    const size_t n = b.size();
    fill_fp8_kernel<<<dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0, static_cast<hipStream_t>(s.handle())>>>(
        b.as<uint8_t>(), n, seed);
    AFF_GPU_CHECK(hipGetLastError());
}

struct Shape {
    const char* name;
    int n, k;
};

Result measure_gemv(const Shape& sh, int batch, const Fp8GemvTuning& t, std::vector<Buffer>& weights,
                    const Buffer& scales, const Buffer& x, Buffer& y) {
    Stream s;
    Result r = measure(static_cast<int>(weights.size()), s, [&](int i, const Stream& st) {
        fp8_gemv_tuned(weights[i % weights.size()].as<uint8_t>(), scales.as<uint8_t>(), sh.n, sh.k, x.as<float>(), batch,
                       y.as<float>(), t, st.handle());
    });
    r.bytes = static_cast<double>(sh.n) * sh.k + static_cast<double>(scales.size()) +
              static_cast<double>(batch) * sh.k * 4 + static_cast<double>(batch) * sh.n * 4;
    return r;
}

}  // namespace

int main() {
    try {
        use_device(select_devices(1)[0]);
        const DeviceInfo info = device_info(0);
        std::printf("device: %s, %d multiprocessors, L2 %.0f MiB\n", info.name.c_str(), info.multiprocessors,
                    info.l2_bytes / 1048576.0);
        const double ceiling = measure_read_ceiling(info.multiprocessors);
        std::printf("HBM read ceiling (streaming read, 4 GiB): %.3f TB/s\n", ceiling / 1e12);

        const Shape shapes[] = {{"wq_b", 32768, 1024},     {"wo_b", 4096, 8192},      {"wo_a", 8192, 4096},
                                {"wq_a", 1024, 4096},      {"shared w1/w3", 2048, 4096}, {"shared w2", 4096, 2048}};
        std::mt19937 rng(12345);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        struct Variant {
            const char* name;
            Fp8GemvTuning tuning;
        };
        const Variant variants[] = {{"rows8", {8, false, false}},     {"rows8 dep", {8, true, false}},
                                    {"rows4", {4, false, false}},     {"rows4 dep", {4, true, false}},
                                    {"rows8 port", {8, false, true}}};
        constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
        int default_variant = -1;
        for (int v = 0; v < kVariants; ++v)
            if (variants[v].tuning.rows_per_group == kFp8GemvDefault.rows_per_group &&
                variants[v].tuning.dependent_launch == kFp8GemvDefault.dependent_launch &&
                variants[v].tuning.portable_decode == kFp8GemvDefault.portable_decode)
                default_variant = v;
        double total_bytes[kVariants][2] = {}, total_time[kVariants][2] = {};
        Buffer sink(sizeof(uint32_t));
        std::printf("%-13s %12s %5s %-11s %10s %8s %8s %10s\n", "shape", "n x k", "batch", "tuning", "graph us",
                    "TB/s", "ceiling", "loop us");
        for (const Shape& sh : shapes) {
            const size_t wbytes = static_cast<size_t>(sh.n) * sh.k;
            // Copies spanning at least 1 GiB: far beyond the L2, so every launch reads HBM.
            const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / wbytes));
            std::vector<Buffer> weights;
            Stream s;
            for (int i = 0; i < copies; ++i) {
                weights.emplace_back(wbytes);
                fill_fp8(weights.back(), 0x1234u + i, s);
            }
            std::vector<uint8_t> sc(static_cast<size_t>((sh.n + 127) / 128) * (sh.k / 128));
            std::uniform_int_distribution<int> e(115, 125);
            for (uint8_t& v : sc) v = static_cast<uint8_t>(e(rng));
            Buffer scales(sc.size());
            upload(scales, sc.data(), sc.size());
            std::vector<float> xv(static_cast<size_t>(kFp8GemvMaxBatch) * sh.k);
            for (float& v : xv) v = nd(rng);
            Buffer x(xv.size() * 4), y(static_cast<size_t>(kFp8GemvMaxBatch) * sh.n * 4);
            upload(x, xv.data(), xv.size() * 4);
            s.synchronize();
            const Result rd = measure_read(weights, info.multiprocessors, sink);
            std::printf("%-13s %6dx%-5d %5s %-11s %10.2f %8.3f %7.1f%% %10.2f\n", sh.name, sh.n, sh.k, "-", "read-only",
                        rd.graph_s * 1e6, rd.bytes / rd.graph_s / 1e12, 100.0 * rd.bytes / rd.graph_s / ceiling,
                        rd.loop_s * 1e6);
            for (const int batch : {1, 4}) {
                for (int v = 0; v < kVariants; ++v) {
                    const Result r = measure_gemv(sh, batch, variants[v].tuning, weights, scales, x, y);
                    const double rate = r.bytes / r.graph_s;
                    std::printf("%-13s %6dx%-5d %5d %-11s %10.2f %8.3f %7.1f%% %10.2f\n", sh.name, sh.n, sh.k, batch,
                                variants[v].name, r.graph_s * 1e6, rate / 1e12, 100.0 * rate / ceiling,
                                r.loop_s * 1e6);
                    total_bytes[v][batch == 4] += r.bytes;
                    total_time[v][batch == 4] += r.graph_s;
                }
            }
        }
        for (int v = 0; v < kVariants; ++v)
            std::printf("summary %-11s batch 1 %.3f TB/s (%.1f%%), batch 4 %.3f TB/s (%.1f%%)\n", variants[v].name,
                        total_bytes[v][0] / total_time[v][0] / 1e12, 100.0 * total_bytes[v][0] / total_time[v][0] / ceiling,
                        total_bytes[v][1] / total_time[v][1] / 1e12, 100.0 * total_bytes[v][1] / total_time[v][1] / ceiling);

        // One layer's projections in the forward's order; 4 copies of the layer (> 4 × the L2).
        struct Proj {
            const char* name;
            int n, k;
            int groups;  // wo_a: 8 groups of 1024 rows, each reading its 4096-float slice of o
        };
        const Proj layer[] = {{"wq_a", 1024, 4096, 1}, {"wkv", 512, 4096, 1},          {"wq_b", 32768, 1024, 1},
                              {"wo_a", 8192, 4096, 8}, {"wo_b", 4096, 8192, 1},        {"shared w1", 2048, 4096, 1},
                              {"shared w3", 2048, 4096, 1}, {"shared w2", 4096, 2048, 1}};
        constexpr int kLayerCopies = 4, kMaxIn = 32768, kMaxOut = 32768;
        std::vector<Buffer> lw, ls;
        {
            Stream s;
            for (int c = 0; c < kLayerCopies; ++c)
                for (const Proj& pj : layer) {
                    lw.emplace_back(static_cast<size_t>(pj.n) * pj.k);
                    fill_fp8(lw.back(), 0x4321u + static_cast<uint32_t>(lw.size()), s);
                    std::vector<uint8_t> sc(static_cast<size_t>((pj.n + 127) / 128) * (pj.k / 128));
                    std::uniform_int_distribution<int> e(115, 125);
                    for (uint8_t& v : sc) v = static_cast<uint8_t>(e(rng));
                    ls.emplace_back(sc.size());
                    upload(ls.back(), sc.data(), sc.size());
                }
            s.synchronize();
        }
        std::vector<float> lxv(static_cast<size_t>(kFp8GemvMaxBatch) * kMaxIn);
        for (float& v : lxv) v = nd(rng);
        Buffer lx(lxv.size() * 4), ly(static_cast<size_t>(kFp8GemvMaxBatch) * kMaxOut * 4);
        upload(lx, lxv.data(), lxv.size() * 4);
        constexpr int kProj = sizeof(layer) / sizeof(layer[0]);
        // mode 0: the forward now; 1: every matrix its own launch; 2: and wo_a 8 × batch launches.
        const char* mode_names[3] = {"multi + grouped (forward now)", "one launch a matrix", "wo_a 8 x batch launches"};
        double layer_rate[3][2] = {};  // [mode][batch 4]
        for (const int batch : {1, 4}) {
            double bytes = 0.0;
            for (const Proj& pj : layer)
                bytes += static_cast<double>(pj.n) * pj.k + static_cast<double>((pj.n + 127) / 128) * (pj.k / 128) +
                         4.0 * batch * (static_cast<double>(pj.k) * pj.groups + pj.n);
            for (const int mode : {0, 1, 2}) {
                const bool grouped = mode < 2;
                Stream s;
                const Result r = measure(kLayerCopies, s, [&](int i, const Stream& st) {
                    const int c = i % kLayerCopies;
                    for (int p = 0; p < kProj; ++p) {
                        const Proj& pj = layer[p];
                        const uint8_t* w = lw[c * kProj + p].as<uint8_t>();
                        const uint8_t* sc = ls[c * kProj + p].as<uint8_t>();
                        if (mode == 0 && (p == 0 || p == 5)) {  // wq_a + wkv, shared w1 + w3: same input
                            const Proj& next = layer[p + 1];
                            const Fp8GemvPart parts[2] = {
                                {w, sc, pj.n, ly.as<float>(), 0},
                                {lw[c * kProj + p + 1].as<uint8_t>(), ls[c * kProj + p + 1].as<uint8_t>(), next.n,
                                 ly.as<float>() + static_cast<size_t>(batch) * pj.n, 0}};
                            fp8_gemv_multi(parts, 2, pj.k, lx.as<float>(), 0, batch, kFp8GemvDefault, st.handle());
                            ++p;
                        } else if (pj.groups == 1) {
                            fp8_gemv(w, sc, pj.n, pj.k, lx.as<float>(), batch, ly.as<float>(), st.handle());
                        } else if (grouped) {
                            Fp8GemvLayout layout;
                            layout.ldx = pj.k * pj.groups;
                            layout.ldy = pj.n;
                            layout.group_rows = pj.n / pj.groups;
                            layout.x_group_stride = pj.k;
                            fp8_gemv_layout(w, sc, pj.n, pj.k, lx.as<float>(), batch, ly.as<float>(), layout,
                                            kFp8GemvDefault, st.handle());
                        } else {
                            const int rows = pj.n / pj.groups;
                            for (int g = 0; g < pj.groups; ++g)
                                for (int b = 0; b < batch; ++b)
                                    fp8_gemv(w + static_cast<size_t>(g) * rows * pj.k,
                                             sc + static_cast<size_t>(g) * rows / 128 * (pj.k / 128), rows, pj.k,
                                             lx.as<float>() + static_cast<size_t>(b) * pj.k * pj.groups +
                                                 static_cast<size_t>(g) * pj.k,
                                             1, ly.as<float>() + static_cast<size_t>(b) * pj.n + g * rows, st.handle());
                        }
                    }
                });
                const double rate = bytes / r.graph_s;
                std::printf("layer batch %d %-30s %.1f MB/step, %8.2f us/step, %.3f TB/s (%.1f%%)\n", batch,
                            mode_names[mode], bytes / 1e6, r.graph_s * 1e6, rate / 1e12, 100.0 * rate / ceiling);
                layer_rate[mode][batch == 4] = rate;
            }
        }

        const int d = default_variant < 0 ? 0 : default_variant;
        const double b1 = total_bytes[d][0] / total_time[d][0], b4 = total_bytes[d][1] / total_time[d][1];
        std::printf("figure: fp8_gemv, one layer's projections as the forward launches them (graph replay): batch 1 "
                    "%.3f TB/s, batch 4 %.3f TB/s; per launch (default tuning: %s) over the 6 V4-Flash shapes (sum "
                    "bytes / sum time): batch 1 %.3f TB/s, batch 4 %.3f TB/s\n",
                    layer_rate[0][0] / 1e12, layer_rate[0][1] / 1e12, variants[d].name, b1 / 1e12, b4 / 1e12);
        std::printf("bound: HBM read ceiling measured in this run: %.3f TB/s\n", ceiling / 1e12);
        std::printf("ratio: per layer batch 1 %.1f%%, batch 4 %.1f%%; per launch batch 1 %.1f%%, batch 4 %.1f%% of "
                    "the ceiling (goal >= 80%%)\n",
                    100.0 * layer_rate[0][0] / ceiling, 100.0 * layer_rate[0][1] / ceiling, 100.0 * b1 / ceiling,
                    100.0 * b4 / ceiling);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8_gemv_bench: %s\n", e.what());
        return 1;
    }
}
