// Quantiser throughput at the real expert geometry: quantises N experts of one
// V4-Flash layer (w1, w3: 2048×4096; w2: 4096×2048) from synthetic FP4 weights (E2M1
// codes with a UE8M0 scale per 32 inputs, dequantised exactly) with T threads, prints
// Mweights/s in all and per thread, and extrapolates to one full layer (256 experts)
// and to the 43 layers of the model (277 G routed weights). Goal (issue 5): the whole
// model in ≤ 1 hour on 16 threads, ≥ 3 Mweights/s a thread.
// With --importance, every matrix gets a synthetic imatrix column weighting (exp of
// N(0,1)) and the automatic rotation choice, which quantises 16 sample rows both ways
// first: the cost of that choice is the difference to a run without.
// With --gpus 1 (GPU builds) the Viterbi searches run on the GPU (the bytes are the CPU's,
// tests/gpu/trellis_encode_test.cpp) and the rest on the T threads; it also prints the
// search's own rate (GPU time including transfers) against the bound: 14,336 float
// operations a weight (7 for each of 2048 windows a weight, 9 with per-position weights)
// at the GPU's FP32 rate without FMA (multiprocessors × 128 lanes × --clock-mhz, default
// 1980, the H200's boost clock), and one CPU search (--cpu-check) for the ratio.
// --codebook FILE quantises with that codebook instead of the built-in (its NMSE on FP4 input).
// usage: quantize_speed_bench [--experts N] [--threads N] [--rotation on|off] [--importance]
//                             [--gpus 0|1] [--blocks-per-sm 2|3] [--clock-mhz F] [--codebook FILE]
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/block_search_choice.hpp"
#include "libaff/quant/block_search.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/matrix.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/trellis_search.hpp"
#endif

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace aff::quant;

namespace {

// Synthetic FP4 matrix: codes and scales from a fixed xorshift stream per row (rows are
// made in parallel).
std::vector<float> fp4_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, aff::ThreadPool& pool) {
    static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    std::vector<float> w(rows * cols);
    pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
            std::uint64_t s = (seed * 0x9E3779B97F4A7C15ull + 1) ^ (r * 0xBF58476D1CE4E5B9ull + 7);
            auto next = [&] {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                return s;
            };
            for (std::size_t g = 0; g < cols / 32; ++g) {
                const float scale = std::ldexp(1.0f, -9 + static_cast<int>(next() % 3));
                for (std::size_t j = 0; j < 32; ++j) {
                    const std::uint64_t code = next() >> 60;  // 4 bits
                    const float v = kE2M1[code & 7] * scale;
                    w[r * cols + g * 32 + j] = (code & 8) ? -v : v;
                }
            }
        }
    });
    return w;
}

// Forwards to another search and adds up its wall time and blocks.
class TimedSearch final : public BlockSearch {
public:
    explicit TimedSearch(BlockSearch& inner) : inner_(inner) {}
    std::string describe() const override { return inner_.describe(); }
    void search(const Codebook& cb, const float* y, std::size_t blocks, const float* q, std::size_t q_blocks,
                const std::uint32_t* q_index, std::uint16_t* windows) override {
        const auto t0 = std::chrono::steady_clock::now();
        inner_.search(cb, y, blocks, q, q_blocks, q_index, windows);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        this->blocks += blocks;
    }
    double seconds = 0;
    std::size_t blocks = 0;

private:
    BlockSearch& inner_;
};

}  // namespace

int main(int argc, char** argv) {
    std::size_t experts = 4, threads = 0;
    int gpus = 0, blocks_per_sm = 2;
    double clock_mhz = 1980;
    std::string codebook_file;
    MatrixOptions opt;
    opt.rotation = Rotation::on;
    bool weighted = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
        if (a == "--experts") experts = std::stoull(next());
        else if (a == "--threads") threads = std::stoull(next());
        else if (a == "--rotation") opt.rotation = next() == "off" ? Rotation::off : Rotation::on;
        else if (a == "--importance") weighted = true;
        else if (a == "--gpus") gpus = std::stoi(next());
        else if (a == "--blocks-per-sm") blocks_per_sm = std::stoi(next());
        else if (a == "--clock-mhz") clock_mhz = std::stod(next());
        else if (a == "--codebook") codebook_file = next();
        else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
    }
    aff::ThreadPool pool(threads);
    std::unique_ptr<BlockSearch> device_search;
    int multiprocessors = 0;
#if defined(AFF_HAVE_GPU)
    if (gpus > 0) {
        device_search = aff::gpu::open_trellis_search(0, blocks_per_sm);
        multiprocessors = aff::gpu::device_info(0).multiprocessors;
    }
#else
    device_search = aff::gpu::open_block_search(gpus);  // refuses --gpus N > 0 without GPU support
#endif
    std::unique_ptr<TimedSearch> timed;
    if (device_search) {
        timed = std::make_unique<TimedSearch>(*device_search);
        opt.search = timed.get();
    }
    const std::size_t I = 2048, D = 4096;
    const Codebook cb = codebook_file.empty() ? Codebook::builtin() : Codebook::read_file(codebook_file);
    double seconds = 0, weights = 0, err = 0, sig = 0;
    int rotated_count = 0;
    std::vector<float> back(D);
    for (std::size_t e = 0; e < experts; ++e) {
        for (int m = 0; m < 3; ++m) {
            const std::size_t rows = m == 2 ? D : I, cols = m == 2 ? I : D;
            const auto w = fp4_matrix(rows, cols, e * 3 + m + 1, pool);
            std::vector<float> importance;
            if (weighted) {
                opt.rotation = Rotation::automatic;
                for (std::size_t j = 0; j < cols; ++j)
                    importance.push_back(static_cast<float>(std::exp(gaussian_sample(e * 3 + m + 100, j))));
            }
            std::vector<std::uint8_t> q(matrix_bytes(rows, cols));
            const auto t0 = std::chrono::steady_clock::now();
            const bool rotated = quantize_matrix(w, rows, cols, importance, opt, cb, pool, q);
            rotated_count += rotated;
            seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            weights += static_cast<double>(rows * cols);
            for (std::size_t r = 0; r < rows; r += 97) {  // quality on a sample of rows
                dequantize_row(std::span(q).subspan(r * row_bytes(cols), row_bytes(cols)), cols, rotated, cb,
                               back.data());
                for (std::size_t j = 0; j < cols; ++j) {
                    const double d = w[r * cols + j] - back[j];
                    err += d * d;
                    sig += static_cast<double>(w[r * cols + j]) * w[r * cols + j];
                }
            }
        }
    }
    const double rate = weights / seconds, per_thread = rate / static_cast<double>(pool.size());
    const double layer = 256.0 * 3 * I * D, model = 43 * layer;
    std::printf("%zu experts x 3 matrices, %zu threads%s%s: %.1f Mweights/s (%.2f per thread); NMSE on FP4 input %.5f; "
                "%d of %zu matrices rotated\n",
                experts, pool.size(), weighted ? ", importance + automatic rotation" : "",
                timed ? (", search on " + timed->describe()).c_str() : "", rate / 1e6, per_thread / 1e6, err / sig,
                rotated_count, experts * 3);
    std::printf("extrapolated: one layer (256 experts) %.0f s; 43 layers %.2f h (goal <= 1 h)\n", layer / rate,
                model / rate / 3600);
    if (timed && timed->seconds > 0) {
        const double searched = static_cast<double>(timed->blocks) * 256, search_rate = searched / timed->seconds;
        const double ops = 14336.0, peak = multiprocessors * 128.0 * clock_mhz * 1e6, bound = peak / ops;
        std::printf("search alone: %.2f s for %.0f Mweights = %.1f Mweights/s (kernel + transfers, %d blocks/SM); "
                    "bound %.1f Mweights/s (%.0f ops a weight at %d SMs x 128 lanes x %.0f MHz = %.1f Tops/s): "
                    "ratio %.2f; rest of quantize_matrix on %zu threads %.2f s\n",
                    timed->seconds, searched / 1e6, search_rate / 1e6, blocks_per_sm, bound / 1e6, ops,
                    multiprocessors, clock_mhz, peak / 1e12, search_rate / bound, pool.size(), seconds - timed->seconds);
    }
    return 0;
}
