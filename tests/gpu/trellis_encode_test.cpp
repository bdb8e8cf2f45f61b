// Device test: the GPU trellis search (kernels/trellis_encode.hip through
// libaff/gpu/trellis_search.cpp) must give the CPU encoder's bytes exactly. Each row's
// value is the number of differing bytes (bound 0) between quantize_matrix with the GPU
// search and without it, on random matrices of every path (rotated, importance-weighted,
// automatic rotation, two passes, padded rows, FP4-like ties, constant and zero rows,
// importance with zeros and a wide range, the full expert geometry), on the inputs of
// tests/unit/quant/quantize_digest_test.cpp against its pinned digests, and on whole
// containers of every tiny fixture made by quantize_checkpoint with and without an imatrix.
#include "device_test.hpp"

#include "libaff/core/hash.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/trellis_search.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/codebook_train.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/quantize_model.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/checkpoint/checkpoint.hpp"
#include "../unit/quant/imatrix_writer.hpp"
#include "../unit/quant/test_rows.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace aff::gpu::test;
using namespace aff::quant;
using aff::test::fp4_like;
using aff::test::importance_of;
using aff::test::rows_of_varying_scale;

namespace {

std::size_t differing(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
}

aff::ThreadPool& pool() {
    static aff::ThreadPool p(0);
    return p;
}

BlockSearch& gpu_search() {
    static const std::unique_ptr<BlockSearch> s = aff::gpu::open_trellis_search(0);
    return *s;
}

std::vector<std::uint8_t> quantise(const std::vector<float>& w, std::size_t rows, std::size_t cols,
                                   const std::vector<float>& importance, MatrixOptions opt, bool gpu,
                                   bool* rotated = nullptr) {
    opt.search = gpu ? &gpu_search() : nullptr;
    std::vector<std::uint8_t> out(matrix_bytes(rows, cols));
    const bool r = quantize_matrix(w, rows, cols, importance, opt, Codebook::builtin(), pool(), out);
    if (rotated) *rotated = r;
    return out;
}

// Adds the row "bytes differing, CPU vs GPU" for one matrix and options.
void compare(std::vector<Row>& rows, const std::string& what, const std::vector<float>& w, std::size_t r,
             std::size_t c, const std::vector<float>& importance, const MatrixOptions& opt) {
    bool rot_cpu = false, rot_gpu = true;
    const auto cpu = quantise(w, r, c, importance, opt, false, &rot_cpu);
    const auto gpu = quantise(w, r, c, importance, opt, true, &rot_gpu);
    add(rows, "trellis", what + " " + std::to_string(r) + "x" + std::to_string(c) + " bytes differing",
        static_cast<double>(differing(cpu, gpu) + (rot_cpu != rot_gpu)), 0.0);
}

std::vector<float> random_importance(std::size_t cols, float spread) {
    std::vector<float> q = normal(cols);
    for (float& v : q) v = std::exp(spread * v);
    return q;
}

// FP4 E2M1 codes times a power-of-two scale per 32 columns (many equal weights: ties).
std::vector<float> fp4(std::size_t rows, std::size_t cols) {
    static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    std::uniform_int_distribution<int> code(0, 15), scale(-9, -7);
    std::vector<float> w(rows * cols);
    for (std::size_t g = 0; g < w.size() / 32; ++g) {
        const int s = scale(rng());
        for (std::size_t j = 0; j < 32; ++j) {
            const int c = code(rng());
            w[g * 32 + j] = std::ldexp((c & 8) ? -kE2M1[c & 7] : kE2M1[c & 7], s);
        }
    }
    return w;
}

}  // namespace

AFF_DEVICE_TEST("trellis random") {
    MatrixOptions on, off, automatic, two;
    on.rotation = Rotation::on;
    off.rotation = Rotation::off;
    automatic.rotation = Rotation::automatic;
    two.rotation = Rotation::on;
    two.encode.passes = 2;
    compare(rows, "gaussian rotated", normal(64 * 1024), 64, 1024, {}, on);
    compare(rows, "gaussian unrotated", normal(64 * 1024, 0.0f, 0.01f), 64, 1024, {}, off);
    compare(rows, "importance unrotated", normal(64 * 1024), 64, 1024, random_importance(1024, 1.0f), off);
    compare(rows, "importance automatic", normal(64 * 1024), 64, 1024, random_importance(1024, 1.0f), automatic);
    compare(rows, "two passes", normal(48 * 512), 48, 512, {}, two);
    compare(rows, "two passes importance", normal(48 * 512), 48, 512, random_importance(512, 1.0f),
            [] { MatrixOptions o; o.rotation = Rotation::off; o.encode.passes = 3; return o; }());
    compare(rows, "padded 384 cols", normal(40 * 384), 40, 384, random_importance(384, 0.5f), off);
    compare(rows, "padded 100 cols", normal(40 * 100), 40, 100, {}, off);
    compare(rows, "padded 128 cols rotated", normal(40 * 128), 40, 128, {}, on);
    compare(rows, "fp4 unrotated (ties)", fp4(64, 2048), 64, 2048, {}, off);
    compare(rows, "fp4 importance", fp4(64, 2048), 64, 2048, random_importance(2048, 2.0f), off);
    {
        // Wide importance range with zero columns (free positions), and odd rows: constant,
        // zero, one non-zero weight, huge and tiny magnitudes.
        const std::size_t r = 32, c = 1024;
        std::vector<float> w = normal(r * c);
        for (std::size_t j = 0; j < c; ++j) {
            w[0 * c + j] = 0.25f;
            w[1 * c + j] = 0.0f;
            w[2 * c + j] = j == 300 ? 1.0f : 0.0f;
            w[3 * c + j] *= 1e15f;  // huge, yet inside the +-2^64 the quantiser takes
            w[4 * c + j] *= 1e-30f;
            w[5 * c + j] = (j % 2) ? 1.0f : -1.0f;
        }
        std::vector<float> q = random_importance(c, 3.0f);
        for (std::size_t j = 0; j < c; j += 7) q[j] = 0.0f;
        for (std::size_t j = 512; j < 768; ++j) q[j] = 0.0f;  // one whole block free
        compare(rows, "odd rows, importance with zeros", w, r, c, q, off);
        compare(rows, "odd rows, flat", w, r, c, {}, off);
        compare(rows, "odd rows, rotated", w, r, c, {}, on);
        // Past 2^64 the quantiser refuses the matrix (a format error naming row and column) on
        // either search, before searching anything.
        w[3 * c + 5] = 1e30f;
        for (const bool on_gpu : {false, true}) {
            double refused = 1.0;
            try {
                quantise(w, r, c, {}, off, on_gpu);
            } catch (const aff::Error& e) {
                refused = e.kind() == aff::ErrorKind::format ? 0.0 : 1.0;
            }
            add(rows, "trellis", std::string("a weight of 1e30 refused as a format error (") + (on_gpu ? "GPU" : "CPU") + " search)",
                refused, 0.0);
        }
    }
    compare(rows, "fp4 full expert w1 geometry", fp4(2048, 4096), 2048, 4096, {}, on);
}

AFF_DEVICE_TEST("trellis digests") {
    // The pinned digests of the CPU encoder, through the GPU search.
    const std::size_t r = 24, c = 1024;
    const auto w = rows_of_varying_scale(r, c, 501);
    const auto q = importance_of(c, 502);
    MatrixOptions opt;
    struct Case {
        const char* what;
        std::vector<float> w, q;
        std::size_t cols;
        Rotation rotation;
        int passes;
        std::uint64_t digest;
    };
    const std::vector<Case> cases = {
        {"rotated", w, {}, c, Rotation::on, 1, 0x7662b8977f55148aull},
        {"weighted", w, q, c, Rotation::off, 1, 0x377b3fcd6e85a633ull},
        {"automatic", w, q, c, Rotation::automatic, 1, 0x377b3fcd6e85a633ull},
        {"two passes", w, {}, c, Rotation::on, 2, 0x382b7a27039151deull},
        {"fp4-like", fp4_like(r, c, 504), {}, c, Rotation::off, 1, 0x593a9d9a29bc5972ull},
        {"padded", rows_of_varying_scale(r, 384, 503), {}, 384, Rotation::off, 1, 0x2725cd9f0959dac7ull},
    };
    for (const Case& k : cases) {
        opt.rotation = k.rotation;
        opt.encode.passes = k.passes;
        const auto bytes = quantise(k.w, r, k.cols, k.q, opt, true);
        add(rows, "trellis", std::string("digest test, ") + k.what + " (GPU digest == pinned)",
            aff::xxh3_64(bytes) == k.digest ? 0.0 : 1.0, 0.0);
    }
}

AFF_DEVICE_TEST("trellis containers") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("aff-trellis-test-" + std::to_string(getpid()));
    fs::create_directories(dir);
    auto read_all = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
    };
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        const std::string src = test_data() + "/models/" + name;
        // An imatrix of random E[x²] (wide range, some zero columns) for every routed expert.
        const aff::Checkpoint ck(src);
        const aff::ModelConfig mc = aff::parse_model_config(ck.config_json(), ck.config_path());
        std::vector<aff::test::GgufTensor> t;
        for (int layer = 0; layer < mc.num_layers; ++layer)
            for (const char* kind : {"gate", "up", "down"}) {
                const std::uint64_t cols = std::string(kind) == "down" ? mc.moe_intermediate_size : mc.hidden_size;
                std::vector<float> sum2 = random_importance(cols * mc.n_routed_experts, 2.0f);
                for (std::size_t j = 0; j < sum2.size(); j += 11) sum2[j] = 0.0f;
                std::vector<float> counts(mc.n_routed_experts, 4.0f);
                const std::string base = "blk." + std::to_string(layer) + ".ffn_" + kind + "_exps.weight";
                t.push_back({base + ".in_sum2", {cols, static_cast<std::uint64_t>(mc.n_routed_experts)}, sum2});
                t.push_back({base + ".counts", {1, static_cast<std::uint64_t>(mc.n_routed_experts)}, counts});
            }
        const auto im = aff::test::gguf(t);
        std::ofstream(dir / "im.gguf", std::ios::binary)
            .write(reinterpret_cast<const char*>(im.data()), static_cast<std::streamsize>(im.size()));
        for (const bool weighted : {false, true}) {
            std::vector<std::uint8_t> bytes[2];
            for (const bool gpu : {false, true}) {
                QuantizeOptions o;
                o.src_dir = src;
                o.out_path = (dir / (gpu ? "gpu.aff" : "cpu.aff")).string();
                if (weighted) o.imatrix_path = (dir / "im.gguf").string();
                o.tool = "trellis device test";
                o.created = "2026-11-29T00:00:00Z";
                o.matrix.search = gpu ? &gpu_search() : nullptr;
                quantize_checkpoint(o, pool(), aff::null_progress());
                bytes[gpu] = read_all(o.out_path);
            }
            add(rows, "trellis",
                std::string("container ") + name + (weighted ? " with imatrix" : "") + ", " +
                    std::to_string(bytes[0].size()) + " B, bytes differing",
                bytes[0].empty() ? 1.0 : static_cast<double>(differing(bytes[0], bytes[1])), 0.0);
        }
    }
    fs::remove_all(dir);
}
