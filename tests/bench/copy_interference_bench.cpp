// What a copy over the bus running beside the decode costs the decode's own kernels (issue 17).
// The tiered decode's prefetch (libaff/gpu/forward_prefetch.cpp) copies a layer's predicted
// pooled experts into HBM with expert_stage's kernel while attention runs; session 16 measured
// the attention-phase kernels slowing beside it by about what the copy saved. Whether a copy
// engine (a DMA memcpy from the pinned pool: no SM, no loads in flight) would slow them less
// decides whether a DMA prefetch is worth building. So: an all-resident model (no bus reads of
// its own) decodes batch 1 and 4 (graph replay, median of STEPS calls) alone, and while a
// second thread keeps the bus busy with expert-sized copies from pinned host memory into HBM
// (its own stream, back to back): expert_stage's copy kernel on 8, 16 and 32 blocks (the
// prefetch's default is 16) of 4 loads in flight a thread and on 4, 8 and 12 of 8 (copy_depth),
// its bulk copy (copy_bulk: one thread and the TMA unit a block) on 1 to 16 blocks of 4 or 8
// chunks of 4 to 16 KiB in flight, the copy engine (Stream::copy) and the same copy as the one
// memcpy node of a captured graph, launched back to back. (Commit 3341224 also measured the
// memcpy as the body of a CUDA switch node chosen on the device, which a DMA prefetch inside
// the decode graph would need: it is no DMA there, 5.2 x the step beside it at 42 GB/s;
// tests/bench/RESULTS.md, session 17.) Each row prints the step time,
// its ratio to the step alone (the bound: 1.00, no interference) and the copy's rate over the
// mapped-read ceiling measured in the same run. Rounds alternate the order of the modes.
//     copy_interference_bench CONTAINER.aff [STEPS]   (STEPS default 32)
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "kernels/expert_stage.hpp"
#include "libaff/gpu/host_copy.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "copy_interference_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using namespace aff::gpu;

constexpr std::size_t kExpertBytes = 9043968;  // a V4-Flash expert's extent at TQ2875, 16-byte multiple
constexpr int kSources = 16;                   // distinct experts in the pinned buffer, copied in turn
constexpr int kRounds = 3;

// One way of moving bytes: 0 = nothing, > 0 = expert_stage's kernel on that many blocks,
// -1 = the copy engine, -2 = a graph of one memcpy node.
struct Mode {
    const char* name;
    int blocks;
    int depth = 4;  // the kernel's loads in flight per thread (ExpertStageArgs::copy_depth)
    bool bulk = false;  // the kernel's bulk copy (ExpertStageArgs::copy_bulk): depth = chunks in flight a block
    int chunk_kib = 16;  // its chunks (ExpertStageArgs::copy_chunk_kib)
};

// The bytes a second thread copies while it runs, and for how long.
struct BusLoad {
    std::atomic<bool> stop{false};
    std::atomic<bool> started{false};
    double bytes = 0, seconds = 0;
};

// expert_stage's arguments for copying source i (one expert in the table, far, one job).
struct StageCopy {
    Buffer tables, counts, stage_table, slot_source, slot;
    std::vector<ExpertStageArgs> args;
    StageCopy(const PinnedBuffer& src, const Mode& mode) {
        const auto* base = static_cast<const std::uint8_t*>(src.device_data());
        tables = expert_table(base, kExpertBytes, kSources);
        counts = to_device(std::vector<std::int32_t>{1});
        stage_table = Buffer(sizeof(void*));
        slot_source = Buffer(sizeof(void*));
        slot = Buffer(kExpertBytes);
        for (int i = 0; i < kSources; ++i) {
            ExpertStageArgs a;
            a.table = tables.as<const std::uint8_t*>() + i;
            a.experts = 1;
            a.counts = counts.as<std::int32_t>();
            a.far_lo[0] = base;
            a.far_hi[0] = base + src.size();
            a.slots = slot.as<std::uint8_t>();
            a.slot_stride = kExpertBytes;
            a.slot_count = 1;
            a.bytes = kExpertBytes;
            a.copy_blocks = mode.blocks;
            a.copy_depth = mode.depth;
            a.copy_bulk = mode.bulk;
            a.copy_chunk_kib = mode.chunk_kib;
            a.stage_table = stage_table.as<const std::uint8_t*>();
            a.slot_source = slot_source.as<const std::uint8_t*>();
            args.push_back(a);
        }
    }
};

void keep_bus_busy(int device, const PinnedBuffer& src, Mode mode, BusLoad& load) {
    const int blocks = mode.blocks;
    use_device(device);
    Stream s;
    Buffer dst(kExpertBytes);
    std::unique_ptr<StageCopy> stage;
    if (blocks > 0) stage = std::make_unique<StageCopy>(src, mode);
    const auto* host = static_cast<const std::uint8_t*>(src.data());
    // The graph (-2): one memcpy node, expert 3 each launch.
    Graph graph;
    if (blocks == -2) graph.capture(s, [&] { s.copy(dst.data(), host + 3 * kExpertBytes, kExpertBytes); });
    auto t0 = std::chrono::steady_clock::now();
    bool first = true;
    for (int i = 0; !load.stop.load(); ++i) {
        for (int j = 0; j < 8; ++j) {
            const int k = (i * 8 + j) % kSources;
            if (stage) expert_stage(stage->args[k], s.handle());
            else if (blocks == -2) graph.launch(s);
            else s.copy(dst.data(), host + std::size_t(k) * kExpertBytes, kExpertBytes);
        }
        s.synchronize();
        if (first) {  // the first batch pays for the set-up: not counted
            first = false;
            t0 = std::chrono::steady_clock::now();
            load.started = true;
            continue;
        }
        load.bytes += 8.0 * double(kExpertBytes);
    }
    load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: copy_interference_bench CONTAINER.aff [STEPS]\n");
        return 2;
    }
    try {
        const std::string path = argv[1];
        const int steps = argc > 2 ? std::max(5, std::atoi(argv[2])) : 32;
        const DeviceInfo info = bench::open_bench_device();
        const double pcie = bench::print_mapped_read_ceiling(info.multiprocessors);
        aff::ThreadPool pool(0);
        const bench::BenchModel model = bench::load_bench_model(path, pool, 4096);
        GpuModel& g = *model.gpu;
        PinnedBuffer src(kExpertBytes * kSources);
        std::fill_n(static_cast<unsigned char*>(src.data()), src.size(), 0x5a);

        bench::DecodeBatch batch(g, 16);
        auto step_ms = [&](int B) { return batch.step_ms(g, B, steps, 0); };
        for (int B : {1, kDecodeBatchMax}) step_ms(B);  // graph captures before any second thread runs

        const std::vector<Mode> modes = {{"alone", 0}, {"kernel, 8 blocks", 8}, {"kernel, 16 blocks", 16},
                                         {"kernel, 32 blocks", 32}, {"kernel, 4 blocks of depth 8", 4, 8},
                                         {"kernel, 8 blocks of depth 8", 8, 8}, {"kernel, 12 blocks of depth 8", 12, 8},
                                         {"copy engine", -1},
                                         {"copy engine, a graph's memcpy node", -2},
                                         {"bulk copy, 1 block of 8 chunks of 16 KiB", 1, 8, true},
                                         {"bulk copy, 2 blocks of 4 x 16 KiB", 2, 4, true},
                                         {"bulk copy, 2 blocks of 8 x 16 KiB", 2, 8, true},
                                         {"bulk copy, 4 blocks of 4 x 16 KiB", 4, 4, true},
                                         {"bulk copy, 4 blocks of 8 x 16 KiB", 4, 8, true},
                                         {"bulk copy, 8 blocks of 8 x 4 KiB", 8, 8, true, 4},
                                         {"bulk copy, 16 blocks of 8 x 4 KiB", 16, 8, true, 4},
                                         {"bulk copy, 8 blocks of 4 x 8 KiB", 8, 4, true, 8},
                                         {"bulk copy, 8 blocks of 8 x 8 KiB", 8, 8, true, 8}};
        struct Row {
            std::vector<double> ms[2], rate;
        };
        std::vector<Row> rows(modes.size());
        for (int r = 0; r < kRounds; ++r) {
            for (std::size_t mi = 0; mi < modes.size(); ++mi) {
                const std::size_t m = r % 2 == 0 ? mi : modes.size() - 1 - mi;
                BusLoad load;
                std::thread t;
                if (modes[m].blocks != 0) {
                    t = std::thread(keep_bus_busy, 0, std::cref(src), modes[m], std::ref(load));
                    while (!load.started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
                rows[m].ms[0].push_back(step_ms(1));
                rows[m].ms[1].push_back(step_ms(kDecodeBatchMax));
                load.stop = true;
                if (t.joinable()) t.join();
                if (modes[m].blocks != 0) rows[m].rate.push_back(load.bytes / load.seconds);
            }
        }
        std::printf("\n%s, %d layers: decode step (graph replay, median of %d, median of %d rounds) beside a copy "
                    "from pinned host memory into HBM on another thread's stream\n",
                    path.c_str(), g.config().num_layers, steps, kRounds);
        std::printf("| copy beside the decode | b1 ms | b1 / alone | b4 ms | b4 / alone | copy GB/s | / mapped-read ceiling %.2f GB/s |\n",
                    pcie / 1e9);
        std::printf("|---|---|---|---|---|---|---|\n");
        const double alone1 = bench::median(rows[0].ms[0]), alone4 = bench::median(rows[0].ms[1]);
        for (std::size_t m = 0; m < modes.size(); ++m) {
            const double b1 = bench::median(rows[m].ms[0]), b4 = bench::median(rows[m].ms[1]);
            const double rate = rows[m].rate.empty() ? 0 : bench::median(rows[m].rate);
            std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |\n", modes[m].name, b1, b1 / alone1, b4,
                        b4 / alone4, rate / 1e9, rate / pcie);
        }
        const double k16 = bench::median(rows[2].ms[0]) / alone1, dma = bench::median(rows[7].ms[0]) / alone1;
        std::printf("\nfigure: batch-1 step beside the copy engine %.3f x alone (the prefetch's kernel on 16 blocks: %.3f x)\n",
                    dma, k16);
        std::printf("bound: 1.000 (no interference)\n");
        std::printf("ratio: %.3f\n", dma);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "copy_interference_bench: %s\n", e.what());
        return 1;
    }
}

#endif
