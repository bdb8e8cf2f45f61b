// End-to-end cost of aff-quantize around the quantiser: quantize_checkpoint on a
// synthetic official-layout checkpoint (one layer of N routed experts at V4-Flash
// geometry, FP4 E2M1 codes with a UE8M0 scale per 32 inputs) against the bound of
// quantize_matrix alone on the same dequantised matrices with the same pool. The ratio
// is what reading, dequantising, hashing the sources, measuring the error and writing
// the container cost on top of the trellis search. --gpus 1 runs the searches of both on
// the GPU (aff-quantize's default when one is visible), where aff-quantize overlaps the
// search of one matrix with the host work of its neighbours, so the end to end rate can
// pass the bound measured matrix by matrix. The last three lines: figure (extrapolated to
// the model's 277 G routed weights), bound and ratio.
// usage: quantize_model_bench [--experts N] [--threads N] [--dir DIR] [--gpus 0|1]
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/block_search_choice.hpp"
#include "libaff/quant/block_search.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/quantize_model.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace aff::quant;

namespace {

constexpr std::uint64_t kHidden = 4096, kInter = 2048;

const char* kConfig = R"({"model_type": "deepseek_v4", "vocab_size": 256, "hidden_size": 4096,
  "num_hidden_layers": 1, "num_attention_heads": 64, "head_dim": 512, "qk_rope_head_dim": 64,
  "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128,
  "compress_ratios": [0, 0], "num_hash_layers": 0, "index_n_heads": 64, "index_head_dim": 128,
  "index_topk": 512, "n_routed_experts": EXPERTS, "num_experts_per_tok": 1,
  "moe_intermediate_size": 2048, "hc_mult": 4, "num_nextn_predict_layers": 1})";

// Writes DIR/config.json and DIR/model.safetensors: w1/w3 [2048, 4096], w2 [4096, 2048]
// as packed FP4 (I8 [rows, cols/2]) with E8M0 scales [rows, cols/32], from xorshift.
void write_checkpoint(const fs::path& dir, std::size_t experts) {
    fs::create_directories(dir);
    std::string cfg = kConfig;
    cfg.replace(cfg.find("EXPERTS"), 7, std::to_string(experts));
    std::ofstream(dir / "config.json") << cfg;
    nlohmann::json header = nlohmann::json::object();
    std::uint64_t offset = 0;
    struct Blob { std::uint64_t size; bool scale; };
    std::vector<Blob> blobs;
    for (std::size_t e = 0; e < experts; ++e)
        for (int w = 1; w <= 3; ++w) {
            const std::uint64_t rows = w == 2 ? kHidden : kInter, cols = w == 2 ? kInter : kHidden;
            const std::string p = "layers.0.ffn.experts." + std::to_string(e) + ".w" + std::to_string(w);
            header[p + ".weight"] = {{"dtype", "I8"}, {"shape", {rows, cols / 2}}, {"data_offsets", {offset, offset + rows * cols / 2}}};
            offset += rows * cols / 2;
            blobs.push_back({rows * cols / 2, false});
            header[p + ".scale"] = {{"dtype", "F8_E8M0"}, {"shape", {rows, cols / 32}}, {"data_offsets", {offset, offset + rows * cols / 32}}};
            offset += rows * cols / 32;
            blobs.push_back({rows * cols / 32, true});
        }
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const std::uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    for (const Blob& b : blobs) {
        std::vector<std::uint8_t> bytes(b.size);
        for (auto& x : bytes) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            x = b.scale ? static_cast<std::uint8_t>(118 + s % 3) : static_cast<std::uint8_t>(s >> 56);
        }
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// Process CPU time, all threads: the figure that a shared, loaded machine still measures.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

}  // namespace

int main(int argc, char** argv) {
    std::size_t experts = 2, threads = 0;
    int gpus = 0;
    fs::path dir = fs::temp_directory_path() / ("aff-quantize-bench-" + std::to_string(::getpid()));
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
        if (a == "--experts") experts = std::stoull(next());
        else if (a == "--threads") threads = std::stoull(next());
        else if (a == "--dir") dir = next();
        else if (a == "--gpus") gpus = std::stoi(next());
        else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
    }
    try {
        write_checkpoint(dir / "ck", experts);
        aff::ThreadPool pool(threads);
        const double weights = double(experts) * 3 * kHidden * kInter;

        // Bound: the quantiser alone on the same matrices, dequantised beforehand.
        const aff::Checkpoint ck((dir / "ck").string());
        const std::unique_ptr<BlockSearch> search = aff::gpu::open_block_search(gpus);
        MatrixOptions opt;
        opt.search = search.get();
        double quantiser = 0, quantiser_cpu = 0;
        for (std::size_t e = 0; e < experts; ++e)
            for (int w = 1; w <= 3; ++w) {
                const std::uint64_t rows = w == 2 ? kHidden : kInter, cols = w == 2 ? kInter : kHidden;
                const auto m = ck.read_f32("layers.0.ffn.experts." + std::to_string(e) + ".w" + std::to_string(w) + ".weight",
                                           {rows, cols});
                std::vector<std::uint8_t> out(matrix_bytes(rows, cols));
                const auto t0 = std::chrono::steady_clock::now();
                const double c0 = cpu_seconds();
                quantize_matrix(m, rows, cols, {}, opt, Codebook::builtin(), pool, out);
                quantiser += seconds_since(t0);
                quantiser_cpu += cpu_seconds() - c0;
            }

        QuantizeOptions q;
        q.src_dir = (dir / "ck").string();
        q.out_path = (dir / "m.aff").string();
        q.tool = "quantize_model_bench";
        q.created = "2026-11-29T00:00:00Z";
        q.matrix.search = search.get();
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = cpu_seconds();
        const QuantizeReport r = quantize_checkpoint(q, pool, aff::null_progress());
        const double total = seconds_since(t0), total_cpu = cpu_seconds() - c0;
        std::printf("quantize_model_bench: %zu experts (%.1f Mweights), %zu threads, search on %s\n", experts,
                    weights / 1e6, pool.size(), search ? search->describe().c_str() : "the CPU threads");
        std::printf("  end to end (quantize_checkpoint): %.2f s wall, %.2f s CPU, %.2f Mweights/s, NMSE %.4f\n",
                    total, total_cpu, weights / total / 1e6, r.nmse);
        std::printf("  bound (quantize_matrix alone):    %.2f s wall, %.2f s CPU, %.2f Mweights/s\n", quantiser,
                    quantiser_cpu, weights / quantiser / 1e6);
        std::printf("  ratio wall %.3f, CPU %.3f (CPU overhead %.1f %%)\n", quantiser / total,
                    quantiser_cpu / total_cpu, 100.0 * (total_cpu - quantiser_cpu) / total_cpu);
        // The model: 43 layers x 256 experts x 3 matrices of 2048 x 4096 = 277 G routed weights.
        const double model = 43.0 * 256 * 3 * kHidden * kInter, rate = weights / total, bound = weights / quantiser;
        std::printf("figure: aff-quantize end to end %.1f Mweights/s = %.2f h for the model's %.0f G routed weights "
                    "(goal <= 1 h)\n",
                    rate / 1e6, model / rate / 3600, model / 1e9);
        std::printf("bound: quantize_matrix alone in the same run %.1f Mweights/s = %.2f h\n", bound / 1e6,
                    model / bound / 3600);
        std::printf("ratio: %.2f (end to end / quantiser alone; above 1 when the pipeline overlaps the search)\n",
                    rate / bound);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "quantize_model_bench: %s\n", e.what());
        fs::remove_all(dir);
        return 1;
    }
    fs::remove_all(dir);
    return 0;
}
