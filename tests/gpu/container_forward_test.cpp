// Device test of the GPU forward on quantised .aff containers, GPU against the CPU forward on
// the same container (the CPU decodes the codebook experts on the fly with quant::matvec, the
// GPU multiplies the stored bytes with moe_gemv, after the hadamard kernel for TQ2875R):
//   - a random checkpoint written here whose expert shapes moe_gemv takes (hidden and expert
//     width 1024, 4 experts, top 2, 3 layers: sliding, CSA, HCA) with FP8 dense linears (E4M3
//     codes, E8M0 block scales) and BF16 experts, quantised by aff-quantize's library call to
//     TQ2875 (--rotation off) and TQ2875R (--rotation on): describe() must say the experts are
//     codebook-stored and the FP8 linears stayed FP8, and a prompt as one prefill (every
//     position's logits) then greedy decode steps must give the CPU's argmax at every position
//     with logits within a tight bound (tests/gpu/forward_compare.hpp);
//   - every tiny fixture quantised the same way (experts too small for moe_gemv: decoded at
//     load through the source's matvec; tiny-a-fp8's dense FP8 stays FP8).
#include "device_test.hpp"
#include "forward_compare.hpp"
#include "../common/random_v4_checkpoint.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/quant/quantize_model.hpp"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace aff::gpu::test;
namespace fs = std::filesystem;

namespace {

constexpr int kDecodeSteps = 10;
constexpr double kMaxNmse = 1e-9;   // fp32 sums in other orders; the same quantised weights on both sides
constexpr double kMaxAbs = 1e-3;    // logits are O(1); measured 1.6e-6 .. 4.6e-6 (RESULTS.md)

// The wide geometry: moe_gemv takes D = I = 1024.
aff::test::V4Geometry wide_geometry() {
    aff::test::V4Geometry g;
    g.vocab = 512;
    g.hidden = 1024;
    g.heads = 4;
    g.head_dim = 128;
    g.rope_dim = 64;
    g.q_lora_rank = 128;
    g.o_groups = 2;
    g.o_lora_rank = 64;
    g.window = 16;
    g.index_heads = 4;
    g.index_head_dim = 128;
    g.index_topk = 4;
    g.experts = 4;
    g.experts_per_token = 2;
    g.expert_width = 1024;
    g.hc = 4;
    g.layer_types = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};
    g.hash = {true, false, false};
    return g;
}

// The random checkpoint, dense linears FP8; returns how many linears are FP8.
int write_wide_checkpoint(const std::string& dir) {
    const aff::test::V4Geometry g = wide_geometry();
    aff::test::RandomSafetensors w(0x5eed);
    const int fp8 = aff::test::write_v4_tensors(w, g, true);
    w.save_checkpoint(dir, aff::test::v4_config(g));
    return fp8;
}

void quantize(const std::string& src, const std::string& out, aff::quant::Rotation rotation, aff::ThreadPool& pool) {
    aff::quant::QuantizeOptions o;
    o.src_dir = src;
    o.out_path = out;
    o.matrix.rotation = rotation;
    o.tool = "aff_gpu_tests";
    o.created = "2026-01-01T00:00:00Z";
    aff::quant::quantize_checkpoint(o, pool, aff::null_progress());
}

// GPU vs CPU on one container: a prompt as one prefill, then greedy decode steps
// (forward_compare.hpp). Returns describe().
std::string compare_container(const std::string& name, const std::string& path, int prompt_len,
                              std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    aff::gpu::GpuOptions opt;
    opt.gemm_min_tokens = 0;  // GEMVs only: the exact path, held to the tight bounds (aff-gpucheck checks the GEMMs)
    aff::gpu::GpuModel gpu(*cpu, &reader, opt);
    const std::string described = gpu.describe();
    std::printf("container %s: %s\n", name.c_str(), described.c_str());
    ForwardCase c;
    c.family = "container";
    c.name = name;
    c.prompt_len = prompt_len;
    c.chunks = {prompt_len};
    c.decode_steps = kDecodeSteps;
    c.max_nmse = kMaxNmse;
    c.max_abs = kMaxAbs;
    compare_forward(*cpu, gpu, c, rows);
    return described;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("aff-gpu-container-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

AFF_DEVICE_TEST("container") {
    TempDir tmp;
    aff::ThreadPool pool(0);
    // The wide random checkpoint, as TQ2875 and as TQ2875R.
    try {
        const std::string ck = tmp / "wide";
        const int fp8 = write_wide_checkpoint(ck);
        // Linears fp8_gemv takes (k % 128 == 0, n % 8 == 0; wo_a sliced per group of 64 rows,
        // the router's 4 rows and the indexer's 4 weights rows are not): the rest stay FP8.
        const int L = int(wide_geometry().layer_types.size());
        const int fp8_on_gpu = fp8 - L - L /* wo_a, gate */ - 1 /* weights_proj */;
        for (const auto& [rotation, label, type] :
             {std::tuple{aff::quant::Rotation::off, "wide D=I=1024, TQ2875", "TQ2875 codebook-stored"},
              std::tuple{aff::quant::Rotation::on, "wide D=I=1024, TQ2875R", "TQ2875R codebook-stored"}}) {
            const std::string path = tmp / (std::string(rotation == aff::quant::Rotation::on ? "r" : "p") + ".aff");
            quantize(ck, path, rotation, pool);
            const std::string d = compare_container(label, path, 37, rows);
            add(rows, "container", std::string(label) + ": describe() says " + type, contains(d, type) ? 0.0 : 1.0, 0.0);
            const std::string want_fp8 = "linears: " + std::to_string(fp8_on_gpu) + " fp8";
            add(rows, "container", std::string(label) + ": describe() says " + want_fp8,
                contains(d, want_fp8) ? 0.0 : 1.0, 0.0);
            fs::remove(path);
        }
    } catch (const std::exception& e) {
        rows.push_back({"container", std::string("wide random container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    // Every tiny fixture through aff-quantize (automatic rotation: TQ2875R at these widths).
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        try {
            const std::string path = tmp / (std::string(name) + ".aff");
            quantize(test_data() + "/models/" + name, path, aff::quant::Rotation::automatic, pool);
            const std::string d = compare_container(name, path, 40, rows);
            if (std::string(name) == "tiny-a-fp8")
                add(rows, "container", "tiny-a-fp8: describe() has FP8 linears", contains(d, "linears: 0 fp8") ? 1.0 : 0.0,
                    0.0);
        } catch (const std::exception& e) {
            rows.push_back({"container", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}
