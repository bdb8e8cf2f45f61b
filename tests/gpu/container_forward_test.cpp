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
#include "wide_container.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

using namespace aff::gpu::test;
namespace fs = std::filesystem;

namespace {

constexpr int kDecodeSteps = 10;
constexpr double kMaxNmse = 1e-9;   // fp32 sums in other orders; the same quantised weights on both sides
constexpr double kMaxAbs = 1e-3;    // logits are O(1); measured 1.6e-6 .. 4.6e-6 (RESULTS.md)

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

}  // namespace

AFF_DEVICE_TEST("container") {
    TempDir tmp("container");
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
            quantize_checkpoint_to(ck, path, rotation, pool);
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
            quantize_checkpoint_to(test_data() + "/models/" + name, path, aff::quant::Rotation::automatic, pool);
            const std::string d = compare_container(name, path, 40, rows);
            if (std::string(name) == "tiny-a-fp8")
                add(rows, "container", "tiny-a-fp8: describe() has FP8 linears", contains(d, "linears: 0 fp8") ? 1.0 : 0.0,
                    0.0);
        } catch (const std::exception& e) {
            rows.push_back({"container", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}
