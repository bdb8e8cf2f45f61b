// Benchmark: decode with the routed experts tiered (issue 17's scenarios). A real-geometry
// container (make_geometry_container, best with --route-skew v4flash: random gates route near
// uniformly) is loaded once on the CPU; for each scenario a GpuModel is built with the expert
// slab capped (GpuTierOptions::slab_cap, what --gpu-expert-mib sets) so that it holds the
// fraction of the experts a card of CARD GiB would hold of the whole V4-Flash, the rest in the
// pinned host pool, the heat mover on (the default). The fraction:
//     slab = CARD − dense − headroom − rest,   fraction = slab / routed,
//   routed = 43 · 256 experts · this container's slot (8.625 MiB at TQ2875: 92.7 GiB),
//   dense  = 8.24 GiB (V4-Flash's dense weights as stored, libaff/placement/tensor_split's figure),
//   headroom = placement::derived_headroom(CARD) (3 % of the card, at least 256 MiB),
//   rest   = the runtime reserve (256 MiB) + this model's activations + one sequence's state
//            scaled to 43 layers (what the GPU model plans: GpuMemoryPlan).
// First, the baseline: every expert in the weight arena (the container fits the device).
// Tokens are teacher-forced from a Zipf stream over the vocabulary (exponent 1.05 over a
// random ranking, as libaff/trace/synthetic's token stream: it drives the hash-routed layers'
// skew). Per scenario, batch 1 and 4: a warm-up of WARM calls (the mover learns), then STEPS
// timed decode calls; figures over the timed calls: ms a token, hit rate per tier (the
// placement engine's counters), moves and mover stalls a token, and the floor
//     floor = HBM bytes / HBM read ceiling + pool bytes / mapped-read ceiling,
//   HBM bytes = the step's resident reads (GpuModel::decode_read_bytes less its routed part,
//               plus the attention state) + slab hits · slot bytes,
//   pool bytes = pool hits · slot bytes (the kernels read pooled experts over the bus),
// both ceilings measured in this run (libaff/gpu/read_ceiling.hpp); no SSD tier yet (0 bytes).
// Moves are not in the floor: they are the mover's cost, which the ratio shows.
//     tiers_bench CONTAINER.aff STEPS WARM CARD_GIB [CARD_GIB ...]
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "libaff/gpu/read_ceiling.hpp"
#include "libaff/placement/tier_plan.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "tiers_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using namespace aff::gpu;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDenseFlash = 8.24 * kGiB;          // V4-Flash's dense weights on one card (tensor_split)
constexpr int kFlashExperts = 43 * 256;
constexpr int kPrompt = 16;

// Token ids with a Zipf(1.05) popularity over a random ranking of the vocabulary.
class TokenStream {
public:
    TokenStream(int vocab, std::uint64_t seed) : rng_(seed), cdf_(std::size_t(vocab)), ids_(std::size_t(vocab)) {
        double sum = 0;
        for (int r = 0; r < vocab; ++r) cdf_[std::size_t(r)] = sum += std::pow(double(r + 1), -1.05);
        for (double& c : cdf_) c /= sum;
        std::iota(ids_.begin(), ids_.end(), 0);
        std::shuffle(ids_.begin(), ids_.end(), rng_);
    }
    std::int32_t next() {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
        const auto r = std::size_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
        return ids_[std::min(r, ids_.size() - 1)];
    }

private:
    std::mt19937_64 rng_;
    std::vector<double> cdf_;
    std::vector<std::int32_t> ids_;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Figures {
    double ms_token = 0, floor_ms_token = 0, gpu_hit = 0, pool_hit = 0, moves_token = 0, stall_ms_token = 0;
    double hbm_mb_token = 0, pool_mb_token = 0;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: tiers_bench CONTAINER.aff STEPS WARM CARD_GIB [CARD_GIB ...]\n");
        return 2;
    }
    try {
        const std::string path = argv[1];
        const int steps = std::max(3, std::atoi(argv[2])), warm = std::max(0, std::atoi(argv[3]));
        const DeviceInfo info = bench::open_bench_device();
        const double hbm = measure_read_ceiling(info.multiprocessors);
        const double pcie = measure_mapped_read_ceiling(info.multiprocessors);
        std::printf("HBM read ceiling (streaming read, 4 GiB): %.3f TB/s\n", hbm / 1e12);
        std::printf("mapped-read ceiling (streaming read of 1 GiB of pinned host memory over the bus): %.2f GB/s\n", pcie / 1e9);

        aff::ThreadPool pool(0);
        const auto t0 = std::chrono::steady_clock::now();
        auto cpu = aff::Model::load(path, pool);
        const aff::ContainerTensorReader stored(std::make_shared<const aff::Container>(aff::Container::open(path)));
        std::printf("%s: CPU model loaded in %.1f s\n", path.c_str(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

        std::vector<Figures> all;
        std::vector<std::string> names;
        // Batch 1 and 4 on `g`: warm-up, then the timed calls.
        auto measure = [&](GpuModel& g, const std::string& label) {
            const aff::ModelConfig& c = g.config();
            const int V = c.vocab_size, L = c.num_layers;
            const std::size_t extent = g.expert_extent(0, 0).bytes;
            for (const int B : {1, kDecodeBatchMax}) {
                TokenStream tokens(V, 1000 + std::uint64_t(B));
                std::vector<GpuDecodeState> states;
                std::vector<GpuDecodeState*> ptrs;
                for (int i = 0; i < B; ++i) states.push_back(g.new_state());
                for (auto& st : states) ptrs.push_back(&st);
                std::vector<std::int32_t> prompt(kPrompt), next(static_cast<std::size_t>(B));
                for (auto& st : states) {
                    for (auto& t : prompt) t = tokens.next();
                    g.forward(st, prompt, false);
                }
                auto call = [&] {
                    for (auto& t : next) t = tokens.next();
                    g.decode(std::span<GpuDecodeState* const>(ptrs.data(), std::size_t(B)), next);
                };
                for (int w = 0; w < warm; ++w) call();
                const GpuTierReport before = g.tiers();
                std::vector<double> ms;
                double state_bytes = 0;
                for (int st = 0; st < steps; ++st) {
                    state_bytes += double(B) * double(g.decode_state_read_bytes(states[0].position));
                    const auto a = std::chrono::steady_clock::now();
                    call();
                    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
                }
                const GpuTierReport after = g.tiers();
                const double tok = double(steps) * B;
                const double chosen = double(std::min(B * c.experts_per_token, c.n_routed_experts));
                const double resident = double(g.decode_read_bytes(B)) - double(L) * chosen * double(extent);
                double gpu_hits = 0, pool_hits = 0, reads = 0;
                if (after.tiered) {
                    gpu_hits = double(after.counters.gpu_hits - before.counters.gpu_hits);
                    pool_hits = double(after.counters.host_hits - before.counters.host_hits);
                    reads = double(after.counters.accesses - before.counters.accesses);
                } else {  // every expert in the arena: the step's routed reads as decode_read_bytes counts them
                    gpu_hits = reads = double(L) * chosen * steps;
                }
                const double hbm_bytes = resident * steps + state_bytes + gpu_hits * double(extent);
                const double pool_bytes = pool_hits * double(extent);
                Figures f;
                f.ms_token = median(ms) / B;
                f.floor_ms_token = (hbm_bytes / hbm + pool_bytes / pcie) * 1e3 / tok;
                f.gpu_hit = reads ? 100 * gpu_hits / reads : 0;
                f.pool_hit = reads ? 100 * pool_hits / reads : 0;
                f.moves_token = double(after.moves - before.moves) / tok;
                f.stall_ms_token = (after.stall_seconds - before.stall_seconds) * 1e3 / tok;
                f.hbm_mb_token = hbm_bytes / tok / 1e6;
                f.pool_mb_token = pool_bytes / tok / 1e6;
                std::printf("[%s] batch %d: %.3f ms a token (median call %.3f ms over %d after %d warm-up), floor %.3f ms "
                            "(HBM %.1f MB, pool %.1f MB a token), ratio %.2f; hits: GPU %.1f %%, host pool %.1f %%, "
                            "SSD 0 %%; %.2f moves a token, mover stalls %.3f ms a token\n",
                            label.c_str(), B, f.ms_token, median(ms), steps, warm, f.floor_ms_token, f.hbm_mb_token,
                            f.pool_mb_token, f.ms_token / f.floor_ms_token, f.gpu_hit, f.pool_hit, f.moves_token,
                            f.stall_ms_token);
                all.push_back(f);
                names.push_back(label + ", batch " + std::to_string(B));
            }
            if (g.tiers().tiered) std::printf("[%s] %s\n", label.c_str(), g.tiers().summary().c_str());
        };

        GpuOptions o;
        o.max_context = 4096;
        // The baseline: every expert in the weight arena (the container fits the device), which
        // also gives the slot size and what the GPU model plans besides the weights.
        std::size_t slot = 0;
        std::int64_t experts = 0;
        GpuMemoryPlan plan;
        {
            const auto tl = std::chrono::steady_clock::now();
            GpuModel g(*cpu, &stored, o);
            std::printf("[resident] built in %.1f s: %s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - tl).count(),
                        g.tiers().describe().c_str());
            slot = (g.expert_extent(0, 0).bytes + 255) / 256 * 256;
            experts = std::int64_t(g.config().num_layers) * g.config().n_routed_experts;
            plan = g.memory_plan();
            measure(g, "resident");
        }
        for (int a = 4; a < argc; ++a) {
            const std::string card = argv[a];
            const double card_bytes = std::atof(card.c_str()) * kGiB;
            if (!(card_bytes > 0)) throw std::runtime_error("CARD " + card + " is not a size in GiB");
            const double routed = double(kFlashExperts) * double(slot);
            const double state43 = double(plan.state_bytes) * 43.0 / double(cpu->config().num_layers);
            const double rest = double(256u << 20) + double(plan.scratch_bytes) + state43;
            const double headroom = double(aff::placement::derived_headroom(std::uint64_t(card_bytes)));
            const double slab = std::max(0.0, card_bytes - kDenseFlash - headroom - rest);
            const double fraction = std::min(1.0, slab / routed);
            const std::int64_t slots = std::int64_t(std::floor(fraction * double(experts)));
            const std::string label = card + " GiB";
            std::printf("\n[%s] slab = %.2f GiB card - %.2f dense - %.2f headroom - %.2f rest (reserve 0.25, activations "
                        "%.2f, state x43 layers %.2f) = %.2f GiB of %.2f GiB routed (43 x 256 x %.3f MiB) = %.1f %% -> %lld of "
                        "%lld experts here (--gpu-expert-mib %llu)\n",
                        label.c_str(), card_bytes / kGiB, kDenseFlash / kGiB, headroom / kGiB, rest / kGiB,
                        double(plan.scratch_bytes) / kGiB, state43 / kGiB, slab / kGiB, routed / kGiB,
                        double(slot) / (1 << 20), 100 * fraction, (long long)slots, (long long)experts,
                        (unsigned long long)((std::uint64_t(slots) * slot + (1u << 20) - 1) >> 20));
            GpuOptions t = o;
            t.tiers.slab_cap = std::size_t(slots) * slot;
            const auto tl = std::chrono::steady_clock::now();
            GpuModel g(*cpu, &stored, t);
            std::printf("[%s] built in %.1f s: %s\n", label.c_str(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - tl).count(), g.tiers().describe().c_str());
            measure(g, label);
        }
        std::printf("\n%-18s %9s %9s %7s %8s %8s %8s %9s\n", "scenario", "ms/token", "floor ms", "ratio", "GPU hit", "pool hit",
                    "moves/t", "stall ms");
        double worst = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
            const Figures& f = all[i];
            worst = std::max(worst, f.ms_token / f.floor_ms_token);
            std::printf("%-18s %9.3f %9.3f %7.2f %7.1f%% %7.1f%% %8.2f %9.3f\n", names[i].c_str(), f.ms_token, f.floor_ms_token,
                        f.ms_token / f.floor_ms_token, f.gpu_hit, f.pool_hit, f.moves_token, f.stall_ms_token);
        }
        std::printf("figure: worst ratio to the floor %.2f (goal <= 1.2); ceilings HBM %.3f TB/s, mapped read %.2f GB/s\n",
                    worst, hbm / 1e12, pcie / 1e9);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tiers_bench: %s\n", e.what());
        return 1;
    }
}
#endif
