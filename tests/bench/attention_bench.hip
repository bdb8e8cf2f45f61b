// Benchmark: decode attention (kernels/attention.hip) at V4-Flash geometry (64 heads × 512,
// window 128), batch 1 and 4, for a sliding layer, a CSA layer (512 selected entries out of
// 16384, a 64K context) and an HCA layer at a 1M context (8192 entries). Figure: effective
// bytes/s, counting each byte the step must move once (the window and entry rows it reads,
// the queries, the outputs, the selection), over the HBM read ceiling measured in the same
// run. Every launch reads another copy of the ring and entries (a layer's worth each, in all
// several times the L2), as decode over 43 layers would. Random data, never zeros. Timing:
// events around a captured graph of back-to-back launches, median of 7 (gpu_bench.hpp). The
// last three lines are the CSA batch-1 figure, its bound and the ratio (tests/bench/RESULTS.md).
// Launches pass decode scratch, so they take the decode kernel (kernels/attention_decode.hip).
// Rows "4x1": 4 sequences of one token, each its own ring and entries, in one attention_batch
// launch that also stores their rings (the forward's batch-4 decode step). Each case runs with
// the tile the decode kernel picks (column "tile") and again with the other tile forced
// ("other": its µs), so one run shows what the choice buys.
#include "kernels/check.hpp"
#include "libaff/gpu/device.hpp"
#include "kernels/attention.hpp"
#include "gpu_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

namespace {

using namespace aff::gpu;
using namespace aff::gpu::bench;

constexpr int kHeads = 64, kDim = 512, kWindow = 128;

// Uniform floats in [−1, 1) from a hash of the index (filled on the device: fast, never zeros
// in bulk).
__global__ void fill_kernel(float* p, size_t n, uint32_t seed) {
    const size_t i = static_cast<size_t>(blockIdx.x) * 256 + threadIdx.x;
    if (i >= n) return;
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    h *= 0x297a2d39u;
    h ^= h >> 15;
    p[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

Buffer random_floats(size_t n, std::mt19937& rng) {
    Buffer b(n * sizeof(float));
    fill_kernel<<<dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256)>>>(b.as<float>(), n, static_cast<uint32_t>(rng()));
    AFF_GPU_CHECK(hipGetLastError());
    AFF_GPU_CHECK(hipDeviceSynchronize());
    return b;
}

struct Case {
    const char* name;
    int batch;
    int entries;    // in the pool
    int selected;   // CSA: per token; 0 = HCA (every visible entry) or sliding (no pool)
    int ratio;
    int seqs = 1;   // > 1: that many sequences of `batch` tokens, each its own state, one attention_batch
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
        std::mt19937 rng(4242);
        const Case cases[] = {{"sliding", 1, 0, 0, 0},          {"sliding", 4, 0, 0, 0},
                              {"csa 64K", 1, 16384, 512, 4},      {"csa 64K", 4, 16384, 512, 4},
                              {"hca 1M", 1, 8192, 0, 128},        {"hca 1M", 4, 8192, 0, 128},
                              {"sliding", 1, 0, 0, 0, 4},         {"csa 64K", 1, 16384, 512, 4, 4},
                              {"hca 1M", 1, 8192, 0, 128, 4}};
        std::printf("%-10s %5s %8s %10s %5s %10s %8s %8s %12s\n", "layer", "batch", "keys", "MB/step", "tile", "graph us",
                    "TB/s", "ceiling", "other (us)");
        double csa1_rate = 0.0;
        for (const Case& c : cases) {
            const int n = c.batch;
            const int64_t start = c.ratio ? static_cast<int64_t>(c.entries) * c.ratio - n : 65536 - n;
            const size_t layer_bytes = (static_cast<size_t>(kWindow) + c.entries) * kDim * sizeof(float);
            const int copies = static_cast<int>(std::max<size_t>(4, (size_t{512} << 20) / layer_bytes)) * c.seqs;
            std::vector<Buffer> rings, pools, sels;
            for (int i = 0; i < copies; ++i) {
                rings.push_back(random_floats(static_cast<size_t>(kWindow) * kDim, rng));
                if (c.entries) pools.push_back(random_floats(static_cast<size_t>(c.entries) * kDim, rng));
                if (c.selected) {
                    std::vector<int32_t> idx(static_cast<size_t>(n) * c.selected);
                    std::uniform_int_distribution<int> pick(0, c.entries - 1);
                    for (int32_t& x : idx) x = pick(rng);  // repeats are harmless here: rows are read either way
                    sels.emplace_back(idx.size() * sizeof(int32_t));
                    upload(sels.back(), idx.data(), idx.size() * sizeof(int32_t));
                }
            }
            const int S = c.seqs;
            Buffer q = random_floats(static_cast<size_t>(S) * n * kHeads * kDim, rng),
                   kv = random_floats(static_cast<size_t>(S) * n * kDim, rng), sink = random_floats(kHeads, rng),
                   out(static_cast<size_t>(S) * n * kHeads * kDim * sizeof(float));
            std::vector<int32_t> counts(n, c.selected);
            Buffer count(n * sizeof(int32_t));
            upload(count, counts.data(), counts.size() * sizeof(int32_t));
            Buffer scratch(attention_scratch_bytes(S * n, kHeads, kDim));
            Stream s;
            // Several sequences: one attention_batch with their rings stored (as the forward's
            // decode step); one sequence: attention() as before. tile: 0 = the kernel's choice.
            int chosen = 0;
            auto run = [&](int tile) { return measure(copies / S, s, [&](int i, const Stream& st) {
                AttentionArgs list[kAttentionMaxBatch];
                float* ring_ptrs[kAttentionMaxBatch];
                for (int k = 0; k < S; ++k) {
                    const int cp = (i * S + k) % copies;
                    AttentionArgs& a = list[k];
                    a.q = q.as<float>() + static_cast<size_t>(k) * n * kHeads * kDim;
                    a.kv = kv.as<float>() + static_cast<size_t>(k) * n * kDim;
                    a.ring = rings[cp].as<float>();
                    ring_ptrs[k] = rings[cp].as<float>();
                    a.sink = sink.as<float>();
                    a.out = out.as<float>() + static_cast<size_t>(k) * n * kHeads * kDim;
                    a.n = n;
                    a.heads = kHeads;
                    a.head_dim = kDim;
                    a.window = kWindow;
                    a.start = start;
                    if (c.entries) {
                        a.entries = pools[cp].as<float>();
                        a.entry_count = c.entries;
                        a.ratio = c.ratio;
                    }
                    if (c.selected) {
                        a.selected = sels[cp].as<int32_t>();
                        a.selected_count = count.as<int32_t>();
                        a.selected_stride = c.selected;
                    }
                    a.scratch = scratch.as<float>() + static_cast<size_t>(k) * attention_scratch_bytes(n, kHeads, kDim) / 4;
                    a.decode_tile = tile;
                }
                if (tile == 0) chosen = attention_tile(list[0]);
                if (S == 1) attention(list[0], st.handle());
                else attention_batch(list, S, ring_ptrs, st.handle());
            }); };
            const Result r = run(0);
            const Result other = run(chosen == 8 ? 32 : 8);
            // Rows each step must read once: the window (ring and this step's latents) and the
            // entries of the union of the tokens' selections (at most n × selected); each
            // sequence its own.
            const double key_rows = S * (kWindow + (c.selected ? static_cast<double>(n) * c.selected : c.entries));
            const double bytes = key_rows * kDim * 4 + 2.0 * S * n * kHeads * kDim * 4 +
                                 (c.selected ? static_cast<double>(S) * n * c.selected * 4 : 0.0);
            const double rate = bytes / r.graph_s;
            char label[32];
            std::snprintf(label, sizeof label, S > 1 ? "%dx%d" : "%d", S, n);
            if (S == 1) std::snprintf(label, sizeof label, "%d", n);
            std::printf("%-10s %5s %8.0f %10.2f %5d %10.2f %8.3f %7.1f%% %12.2f\n", c.name, label, key_rows, bytes / 1e6,
                        chosen, r.graph_s * 1e6, rate / 1e12, 100.0 * rate / ceiling, other.graph_s * 1e6);
            if (c.selected && n == 1 && S == 1) csa1_rate = rate;
        }
        std::printf("figure: CSA decode attention, batch 1: %.3f TB/s effective\n", csa1_rate / 1e12);
        std::printf("bound: HBM read ceiling %.3f TB/s\n", ceiling / 1e12);
        std::printf("ratio: %.1f%%\n", 100.0 * csa1_rate / ceiling);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "attention_bench: %s\n", e.what());
        return 1;
    }
}
