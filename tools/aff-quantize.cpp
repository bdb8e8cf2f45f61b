// aff-quantize: turns a DeepSeek-V4 checkpoint directory into an .aff container with
// its routed experts quantised to 2.875 bits a weight (or, with --dspark, the mtp.*
// draft stages into a draft container against the main container's codebook). The
// work is libaff/quant/quantize_model.cpp; this file maps flags and prints a summary.
// The Viterbi searches run on a GPU when one is visible (--gpus 0: the CPU); the bytes
// are the same either way.
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/block_search_choice.hpp"
#include "libaff/model/completeness.hpp"
#include "libaff/quant/quantize_model.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Quantise the routed experts of a DeepSeek-V4 checkpoint into an .aff container.", "aff-quantize"};
    aff::quant::QuantizeOptions opt;
    std::string rotation = "auto";
    app.add_option("--src", opt.src_dir, "checkpoint directory (config.json, safetensors, tokenizer.json)");
    app.add_option("--out", opt.out_path, "container to write");
    app.add_option("--imatrix", opt.imatrix_path, "llama.cpp importance matrix (GGUF or legacy .dat)");
    app.add_option("--layers", opt.layers, "keep only the first N main layers (a smaller, consistent model)");
    app.add_flag("--dspark", opt.draft, "write the draft container: the mtp.* stages only");
    app.add_option("--codebook", opt.codebook_path, "with --dspark: the main container (or a codebook file)");
    app.add_option("--rotation", rotation, "Hadamard rotation of expert inputs: auto, on, off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->default_str("auto");
    int gpus = -1;
    app.add_option("--gpus", gpus, "GPUs for the search (0 = the CPU; default: one when a GPU is visible)")
        ->check(aff::cli::whole_number_at_least(0))
        ->default_str("auto");
    std::size_t& threads = aff::cli::add_threads(app);
    const aff::cli::Common& common = aff::cli::add_common(app);
    return aff::cli::run(app, argc, argv, [&] {
        opt.matrix.rotation = rotation == "on"    ? aff::quant::Rotation::on
                              : rotation == "off" ? aff::quant::Rotation::off
                                                  : aff::quant::Rotation::automatic;
        opt.tool = std::string("aff-quantize ") + AFF_VERSION;
        opt.created = aff::quant::default_creation_time();
        opt.check_complete = aff::check_checkpoint_complete;
        auto progress = common.progress();
        aff::ThreadPool pool(threads);
        const std::unique_ptr<aff::quant::BlockSearch> search = aff::gpu::open_block_search(gpus);
        opt.matrix.search = search.get();
        if (search) progress->note("aff-quantize: searching on " + search->describe());
        const aff::quant::QuantizeReport r = aff::quant::quantize_checkpoint(opt, pool, *progress);
        if (common.json) std::cout << aff::quant::report_json(r, opt.out_path).dump(2) << '\n';
        progress->note("aff-quantize: " + aff::quant::summary_line(r, opt.out_path));
        return aff::cli::exit_ok;
    });
}
