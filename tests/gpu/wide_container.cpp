// The device tests' codebook-stored model and V4-geometry containers (wide_container.hpp).
#include "wide_container.hpp"

#include "libaff/core/progress.hpp"
#include "libaff/quant/geometry_container.hpp"
#include "libaff/core/thread_pool.hpp"

#include <unistd.h>

namespace aff::gpu::test {

// moe_gemv takes D = I = 1024.
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

int write_wide_checkpoint(const std::string& dir) {
    const aff::test::V4Geometry g = wide_geometry();
    aff::test::RandomSafetensors w(0x5eed);
    const int fp8 = aff::test::write_v4_tensors(w, g, true);
    w.save_checkpoint(dir, aff::test::v4_config(g));
    return fp8;
}

void quantize_checkpoint_to(const std::string& src, const std::string& out, aff::quant::Rotation rotation,
                            aff::ThreadPool& pool) {
    aff::quant::QuantizeOptions o;
    o.src_dir = src;
    o.out_path = out;
    o.matrix.rotation = rotation;
    o.tool = "aff_gpu_tests";
    o.created = "2026-01-01T00:00:00Z";
    aff::quant::quantize_checkpoint(o, pool, aff::null_progress());
}

void for_each_wide_container(const TempDir& tmp, aff::ThreadPool& pool,
                             const std::function<void(const std::string&, const std::string&)>& f) {
    const std::string ck = tmp / "wide";
    write_wide_checkpoint(ck);
    for (const auto rotation : {aff::quant::Rotation::off, aff::quant::Rotation::on}) {
        const bool r = rotation == aff::quant::Rotation::on;
        const std::string path = tmp / (r ? "r.aff" : "p.aff");
        quantize_checkpoint_to(ck, path, rotation, pool);
        f(r ? "wide TQ2875R" : "wide TQ2875", path);
    }
}

std::string write_v4_geometry(const TempDir& tmp, const std::string& name, int layers, int experts, bool mtp,
                              aff::ThreadPool& pool) {
    aff::quant::GeometryContainerOptions o;
    o.out_path = tmp / name;
    o.layers = layers;
    o.experts = experts;
    o.vocab = 4096;
    o.mtp = mtp;
    o.tool = "aff_gpu_tests";
    aff::quant::write_geometry_container(o, pool, aff::null_progress());
    return o.out_path;
}

TempDir::TempDir(const std::string& tag)
    : path(std::filesystem::temp_directory_path() / ("aff-gpu-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

}  // namespace aff::gpu::test
