// aff-gpucheck: every GPU op against its CPU twin on a container's real weights, then the GPU
// forward against the CPU reference forward; one line per check (op, what, max relative
// error, threshold, PASS/FAIL) or one JSON object, exit status 1 when any check fails. The
// checks are libaff/gpu/gpucheck.cpp; this file maps flags to options.
#include "libaff/gpu/gpucheck.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Check every GPU op against its CPU twin on a model's real weights.", "aff-gpucheck"};
    std::string model;
    aff::gpu::GpuCheckOptions opt;
    bool no_forward = false, no_tiers = false;
    app.add_option("-m,--model", model, ".aff container")->required()->check(CLI::ExistingPath);
    app.add_option("--layer", opt.layers, "layer to check op by op (repeatable; default: the first of each kind)")
        ->check(aff::cli::whole_number_at_least(0));
    app.add_option("--tokens", opt.tokens, "activation rows per op and prompt length (1..64)")->capture_default_str();
    app.add_option("--decode-steps", opt.decode_steps, "greedy decode steps after the prompt")->capture_default_str();
    app.add_flag("--no-forward", no_forward, "skip the end-to-end GPU-vs-CPU forward");
    app.add_flag("--no-tiers", no_tiers, "skip the tiered-vs-all-resident check (experts in a small slab and the host pool)");
    app.add_option("--seed", opt.seed, "seed of the random activations and tokens")->capture_default_str();
    app.add_option("--device", opt.device, "GPU ordinal among the visible devices")->capture_default_str();
    std::size_t& threads = aff::cli::add_threads(app);
    const aff::cli::Common& common = aff::cli::add_common(app);
    return aff::cli::run(app, argc, argv, [&] {
        opt.end_to_end = !no_forward;
        opt.tiered = !no_tiers;
        aff::ThreadPool pool(threads);
        auto progress = common.progress();
        const aff::gpu::GpuCheckReport report = aff::gpu::run_gpucheck(model, opt, pool, *progress);
        if (common.json) aff::gpu::write_json(std::cout, report);
        else aff::gpu::write_text(std::cout, report);
        return report.ok() ? aff::cli::exit_ok : aff::cli::exit_failure;
    });
}
