// Benchmark: a prefill chunk on a tiered model, with the prefill GEMMs' staging of bus-read
// experts (GpuOptions::prefill_staging, kernels/expert_stage.hpp) off, on and automatic
// (issue 17: stream each needed expert once per chunk, or read host memory once per 64-job tile;
// which wins when). A real-geometry container (make_geometry_container; --route-skew v4flash
// piles a chunk's tokens on fewer experts) is loaded once on the CPU; first every expert in the
// weight arena (the baseline), then for each mode a GpuModel with the slab capped at
// SLAB_PERCENT % of the experts (0: every expert in the pinned host pool), placement static (no
// mover: every mode reads the same tiers). Per chunk size (default 64, 512, 2048 tokens): one
// warm-up call, then REPS timed calls, each on a fresh state (a prompt's first chunk, only the
// last row's logits), of the same Zipf(1.05) token ids (seed 7: the hash-routed layers' skew).
// Figures per chunk: median ms, tok/s, and the bytes the routed GEMMs read over the bus, from
// the staging counters (GpuTierReport: the pick counts in every mode):
//     bus bytes = staged experts · extent bytes (each copied once)
//               + tiles read in place · (w1 + w3 + w2 bytes) (each 64-job tile reads them once),
// against the mapped-read ceiling measured in this run (libaff/gpu/read_ceiling.hpp): bus floor
// = bus bytes / ceiling, the time the chunk cannot beat whatever the tensor cores do.
// Off's bus bytes are what reading in place costs; on's and automatic's what staging costs.
// The bus bytes of the experts the mapped reads may serve from the GPU's L2 are counted as
// read: what the timing shows against the floor says how far that holds.
// Use --layers 4 or more: the first 3 layers are hash-routed, only later ones take --route-skew.
//     prefill_tiers_bench CONTAINER.aff [SLAB_PERCENT [REPS [CHUNK ...]]]
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "prefill_tiers_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using namespace aff::gpu;
using bench::median;

// TQ2875: 92 bytes a block of 256 weights (formats/quant-codebook.md).
double matrix_bytes(int rows, int cols) { return double(rows) * double(cols / 256) * 92.0; }

struct Row {
    std::string mode;
    int chunk = 0;
    double ms = 0, bus_bytes = 0;
    std::uint64_t staged = 0, in_place = 0, in_place_tiles = 0, staged_tiles = 0;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: prefill_tiers_bench CONTAINER.aff [SLAB_PERCENT [REPS [CHUNK ...]]]\n");
        return 2;
    }
    try {
        const std::string path = argv[1];
        const double slab_percent = argc > 2 ? std::atof(argv[2]) : 0.0;
        const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
        std::vector<int> chunks;
        for (int i = 4; i < argc; ++i) chunks.push_back(std::max(1, std::atoi(argv[i])));
        if (chunks.empty()) chunks = {64, 512, 2048};
        const DeviceInfo info = bench::open_bench_device();
        const double pcie = bench::print_mapped_read_ceiling(info.multiprocessors);

        aff::ThreadPool pool(0);
        const bench::BenchModel m = bench::load_bench_cpu(path, pool);
        const aff::ModelConfig& c = m.cpu->config();
        const int longest = *std::max_element(chunks.begin(), chunks.end());
        // Zipf(1.05) token ids over a random ranking of the vocabulary (text's skew, which the
        // hash-routed layers' tid2eid passes on to their experts).
        std::mt19937_64 rng(7);
        std::vector<std::int32_t> ranked(static_cast<std::size_t>(c.vocab_size));
        std::iota(ranked.begin(), ranked.end(), 0);
        std::shuffle(ranked.begin(), ranked.end(), rng);
        std::vector<double> weight(ranked.size());
        for (std::size_t r = 0; r < weight.size(); ++r) weight[r] = std::pow(double(r + 1), -1.05);
        std::discrete_distribution<std::size_t> pick(weight.begin(), weight.end());
        std::vector<std::int32_t> tokens(static_cast<std::size_t>(longest));
        for (auto& t : tokens) t = ranked[pick(rng)];
        const double w13 = matrix_bytes(c.moe_intermediate_size, c.hidden_size);
        const double w2 = matrix_bytes(c.hidden_size, c.moe_intermediate_size);

        GpuOptions o;
        o.max_context = std::max(4096, longest);
        std::vector<Row> rows;
        // Median ms of a chunk of n tokens on a fresh state, after one warm-up call; the
        // counters' growth over the timed calls, per call.
        auto measure = [&](GpuModel& g, const std::string& mode) {
            for (const int n : chunks) {
                const std::span<const std::int32_t> chunk(tokens.data(), std::size_t(n));
                {
                    GpuDecodeState st = g.new_state();
                    g.forward(st, chunk, false);
                }
                const GpuTierReport before = g.tiers();
                std::vector<double> ms;
                for (int r = 0; r < reps; ++r) {
                    GpuDecodeState st = g.new_state();
                    const auto a = std::chrono::steady_clock::now();
                    g.forward(st, chunk, false);
                    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
                }
                const GpuTierReport after = g.tiers();
                Row row;
                row.mode = mode;
                row.chunk = n;
                row.ms = median(ms);
                if (after.tiered) {
                    row.staged = (after.staged_experts - before.staged_experts) / std::uint64_t(reps);
                    row.in_place = (after.in_place_experts - before.in_place_experts) / std::uint64_t(reps);
                    row.in_place_tiles = (after.in_place_tiles - before.in_place_tiles) / std::uint64_t(reps);
                    row.staged_tiles = (after.staged_tiles - before.staged_tiles) / std::uint64_t(reps);
                    row.bus_bytes = double(row.staged) * double(g.expert_extent(0, 0).bytes) +
                                    double(row.in_place_tiles) * (2 * w13 + w2);
                }
                std::printf("[%s] chunk %d: %.2f ms (median of %d), %.0f tok/s; bus %.1f MB (floor %.2f ms at the ceiling): "
                            "%llu experts staged (%llu tiles), %llu read in place (%llu tiles)\n",
                            mode.c_str(), n, row.ms, reps, n / row.ms * 1e3, row.bus_bytes / 1e6, row.bus_bytes / pcie * 1e3,
                            (unsigned long long)row.staged, (unsigned long long)row.staged_tiles,
                            (unsigned long long)row.in_place, (unsigned long long)row.in_place_tiles);
                rows.push_back(row);
            }
        };

        std::size_t slot = 0;
        std::int64_t experts = 0;
        {
            const std::unique_ptr<GpuModel> g = bench::build_tier_model(m, o, "resident");
            slot = bench::tier_slot_bytes(*g);
            experts = std::int64_t(c.num_layers) * c.n_routed_experts;
            measure(*g, "resident");
        }
        const std::int64_t slab_slots = std::int64_t(double(experts) * std::clamp(slab_percent, 0.0, 100.0) / 100.0);
        for (const auto& [mode, name] : {std::pair{PrefillStaging::off, "off"}, std::pair{PrefillStaging::on, "on"},
                                         std::pair{PrefillStaging::automatic, "automatic"}}) {
            GpuOptions t = o;
            t.tiers.slab_cap = std::size_t(slab_slots) * slot;
            t.tiers.strategy = "static";
            t.prefill_staging = mode;
            const std::unique_ptr<GpuModel> g = bench::build_tier_model(m, t, std::string("staging ") + name);
            measure(*g, std::string("staging ") + name);
        }
        std::printf("\n%lld of %lld experts in the slab, the rest in the host pool; %d staging slots at most; bus ceiling %.2f GB/s\n",
                    (long long)slab_slots, (long long)experts, o.prefill_stage_slots, pcie / 1e9);
        std::printf("%-18s %6s %10s %10s %10s %11s %8s %9s\n", "mode", "chunk", "ms", "tok/s", "bus MB", "bus floor", "staged",
                    "in place");
        for (const Row& r : rows)
            std::printf("%-18s %6d %10.2f %10.0f %10.1f %9.2f ms %8llu %9llu\n", r.mode.c_str(), r.chunk, r.ms, r.chunk / r.ms * 1e3,
                        r.bus_bytes / 1e6, r.bus_bytes / pcie * 1e3, (unsigned long long)r.staged, (unsigned long long)r.in_place);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prefill_tiers_bench: %s\n", e.what());
        return 1;
    }
}
#endif
