// make_geometry_container: writes an .aff container with DeepSeek-V4-Flash's real geometry
// and synthetic weights (libaff/quant/geometry_container.hpp), for the GPU checks and the
// decode/prefill benchmarks, which need real shapes and not real values. A bench utility,
// not a user tool: its output is noise to a user.
//     make_geometry_container OUT.aff [--layers N] [--experts E] [--vocab V] [--seed S] [--mtp | --dspark]
//                             [--route-skew FAMILY]
// Defaults: 2 layers (sliding, sliding), 256 experts (≈ 2.3 GB of experts a layer), the real
// 129 280-token vocabulary. --dspark also writes OUT.dspark.aff, the draft container of three
// DSpark stages (V4-Flash-0731's drafter; aff-run -m OUT.aff --draft dspark finds it beside
// OUT.aff). --layers 3 adds the first CSA layer, 4 the first HCA layer.
// --route-skew v4flash biases each learned layer's router with the per-layer popularity shape
// of the synthetic v4flash trace family (libaff/trace/synthetic.hpp: Zipf exponent 1.6 ± 0.2,
// uniform floor 0.15; GeometryContainerOptions::zipf_s says how), so that expert caches have
// the skew to exploit that a trained V4-Flash gives them; none (the default) routes near uniformly.
#include "libaff/quant/geometry_container.hpp"
#include "libaff/core/units.hpp"
#include "libaff/trace/synthetic.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Write a DeepSeek-V4-Flash-shaped .aff container with synthetic weights.",
                 "make_geometry_container"};
    aff::quant::GeometryContainerOptions opt;
    opt.tool = "make_geometry_container " AFF_VERSION;
    app.add_option("out", opt.out_path, "container to write")->required();
    app.add_option("--layers", opt.layers, "first N of the 43 layers (real layer order)")->capture_default_str();
    app.add_option("--experts", opt.experts, "routed experts a layer (6..256)")->capture_default_str();
    app.add_option("--vocab", opt.vocab, "embedding/head rows (smaller files)")->capture_default_str();
    app.add_option("--seed", opt.seed, "generator seed")->capture_default_str();
    app.add_flag("--mtp", opt.mtp, "also the MTP layer mtp.0 (speculative decoding benchmarks)");
    app.add_flag("--dspark", opt.dspark, "also OUT.dspark.aff, a draft container of three DSpark stages");
    std::string skew = "none";
    app.add_option("--route-skew", skew, "router bias with a synthetic trace family's popularity shape (v4flash) or none")
        ->capture_default_str();
    std::size_t& threads = aff::cli::add_threads(app);
    const aff::cli::Common& common = aff::cli::add_common(app, false);
    return aff::cli::run(app, argc, argv, [&] {
        if (skew != "none") {
            const aff::trace::SyntheticParams family = aff::trace::synthetic_family(skew);
            opt.zipf_s = family.zipf_s;
            opt.zipf_s_spread = family.zipf_s_spread;
            opt.floor = family.floor;
        }
        aff::ThreadPool pool(threads);
        auto progress = common.progress();
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = aff::quant::write_geometry_container(opt, pool, *progress);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!common.quiet)
            std::printf("%s: %llu dense tensors (%s), %llu experts (%s), %s in %.1f s (%s)\n", opt.out_path.c_str(),
                        (unsigned long long)r.dense_tensors, aff::format_bytes(r.dense_bytes).c_str(),
                        (unsigned long long)r.experts, aff::format_bytes(r.expert_bytes).c_str(),
                        aff::format_bytes(r.file_bytes).c_str(), s, aff::format_rate(double(r.file_bytes) / s).c_str());
        if (!common.quiet && !r.draft_path.empty()) std::printf("draft container: %s\n", r.draft_path.c_str());
        return aff::cli::exit_ok;
    });
}
