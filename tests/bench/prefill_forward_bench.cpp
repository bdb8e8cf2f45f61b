// Benchmark 3, end to end: the GPU forward's prefill of a 4K and a 32K prompt (chunks of 4096
// tokens) at DeepSeek-V4-Flash's real geometry, from a container of the real per-layer shapes
// with synthetic weights made on the device machine by make_geometry_container (--layers 4 or
// more: sliding, sliding, CSA, HCA, ...). GpuModel::set_max_layers runs prefixes of 0 .. N
// layers, so a layer's time is the difference of two prefixes' prompt times (wall clock of the
// forward calls: upload, every kernel, the last row's logits); the 43-layer prompt time is
// extrapolated with V4-Flash's composition (2 sliding, 21 CSA, 20 HCA) plus the zero-layer
// time. Everything the forward does is timed (mHC, norms, RoPE, router, compressors included),
// unlike prefill_bench, which times the GEMM, indexer and attention kernels by class.
// FLOPs: the same count as prefill_bench (2·m·n·k per product, 4·H·Dh per attention pair,
// 2·Hi·Di per indexer pair). Bound: the H200's dense bf16 tensor peak, 989 TFLOP/s. The last
// three lines are the 32K prompt's figure, bound and ratio (tests/bench/RESULTS.md).
//     prefill_forward_bench CONTAINER.aff
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "prefill_forward_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

constexpr int kChunk = 4096;
constexpr double kPeak = 989e12;       // H200 dense bf16 tensor FLOP/s (spec)

// FLOPs of one layer of `kind` over a prompt of `tokens` (positions 0 .. tokens-1).
double layer_flops(const aff::ModelConfig& c, int kind, int ratio, long long tokens) {
    const double D = c.hidden_size, H = c.num_heads, Dh = c.head_dim, Rq = c.q_lora_rank, G = c.o_groups,
                 Ro = c.o_lora_rank, I = c.moe_intermediate_size, E = c.n_routed_experts, K = c.experts_per_token,
                 Hi = c.index_heads, Di = c.index_head_dim;
    double per_token = Rq * D + H * Dh * Rq + Dh * D + G * Ro * (H * Dh / G) + D * G * Ro;  // attention projections
    per_token += 3 * I * D + E * D + K * 3 * I * D;                                     // shared, gate, routed
    if (kind == 1) per_token += 2 * (2 * Dh) * D + 2 * (2 * Di) * D + Hi * D + Hi * Di * Rq;  // compressors, indexer
    if (kind == 2) per_token += 2 * Dh * D;
    double flops = 2.0 * per_token * tokens;
    for (long long p = 0; p < tokens; ++p) {
        double keys = static_cast<double>(std::min<long long>(c.sliding_window, p + 1));
        const long long visible = ratio > 0 ? (p + 1) / ratio : 0;
        if (kind == 1) {
            keys += std::min<long long>(c.index_topk, visible);
            flops += 2.0 * Hi * Di * visible;
        }
        if (kind == 2) keys += visible;
        flops += 4.0 * H * Dh * keys;
    }
    return flops;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: prefill_forward_bench CONTAINER.aff\n");
        return 2;
    }
    try {
        using namespace aff::gpu;
        const std::string path = argv[1];
        bench::open_bench_device();
        aff::ThreadPool pool(0);
        const bench::BenchModel model = bench::load_bench_model(path, pool, 32768);
        GpuModel& g = *model.gpu;
        const aff::ModelConfig& c = g.config();
        const int L = c.num_layers, V = c.vocab_size;
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> tok(0, V - 1);
        std::vector<std::int32_t> prompt(32768);
        for (auto& t : prompt) t = tok(rng);

        // Seconds of a prompt of `tokens` through the first `layers` layers (fresh state; the
        // first chunk of the first call also warms the kernels up, so every point runs twice).
        auto prompt_s = [&](long long tokens, int layers) {
            g.set_max_layers(layers);
            double best = 1e30;
            for (int rep = 0; rep < 2; ++rep) {
                GpuDecodeState st = g.new_state();
                const auto a = std::chrono::steady_clock::now();
                for (long long at = 0; at < tokens; at += kChunk)
                    g.forward(st, std::span<const std::int32_t>(prompt.data() + at, std::size_t(kChunk)), false);
                best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
            }
            return best;
        };
        double figure = 0.0;
        for (const long long tokens : {4096LL, 32768LL}) {
            std::vector<double> t(L + 1);
            for (int l = 0; l <= L; ++l) t[l] = prompt_s(tokens, l);
            double est = t[0], flops = 0.0;
            int kind_ratio[3] = {};
            std::printf("\nprompt %lld tokens (chunks of %d): time of the first N layers\n", tokens, kChunk);
            for (int l = 0; l < L; ++l) {
                kind_ratio[static_cast<int>(c.attention[l])] = c.compress_ratio[l];
                std::printf("  %d layers (+%s): %.3f s, layer %.3f s\n", l + 1, bench::kind_name(c.attention[l]), t[l + 1],
                            t[l + 1] - t[l]);
            }
            const std::array<double, 3> kind_s = bench::per_kind_layer_mean(c, t);
            for (int k = 0; k < 3; ++k) {
                est += bench::kFlashLayers[k] * kind_s[k];
                flops += bench::kFlashLayers[k] * layer_flops(c, k, kind_ratio[k], tokens);
            }
            figure = flops / est;
            std::printf("prompt %lld tokens, 43 layers (extrapolated from %d): %.3f s = %.0f tok/s, %.1f TFLOP at %.1f "
                        "TFLOP/s\n",
                        tokens, L, est, tokens / est, flops / 1e12, figure / 1e12);
        }
        std::printf("\nfigure: %.1f TFLOP/s, 32K-token prefill end to end (43 layers extrapolated)\n", figure / 1e12);
        std::printf("bound: %.1f TFLOP/s (H200 dense bf16 tensor peak)\n", kPeak / 1e12);
        std::printf("ratio: %.1f %%\n", 100.0 * figure / kPeak);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prefill_forward_bench: %s\n", e.what());
        return 1;
    }
}
#endif
