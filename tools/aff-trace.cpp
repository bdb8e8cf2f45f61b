// aff-trace: inspects route traces (formats/route-trace.md) and replays the placement
// policies over them. `summary` prints per-layer expert popularity; `replay` runs the
// placement engine's own policies (libaff/placement) at each GPU capacity and prints hit
// rates, bytes moved and modelled time per token (text, --json, --svg curve); `synth`
// writes a synthetic trace of a named family (libaff/trace/synthetic.hpp). The work is in
// libaff/trace; this file maps flags.
#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/trace/profile_from_trace.hpp"
#include "libaff/trace/replay.hpp"
#include "libaff/trace/route_trace.hpp"
#include "libaff/trace/route_trace_writer.hpp"
#include "libaff/trace/summary.hpp"
#include "libaff/trace/synthetic.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    CLI::App app{"Summarise route traces, replay placement policies over them, or write synthetic ones.", "aff-trace"};
    app.require_subcommand(1);
    app.fallthrough();  // --json, --quiet and --progress may follow the subcommand
    const aff::cli::Common& common = aff::cli::add_common(app);

    std::string trace_path;
    CLI::App* summary = app.add_subcommand("summary", "steps, tokens and per-layer expert popularity of a trace");
    summary->add_option("trace", trace_path, "route trace")->required();

    CLI::App* replay = app.add_subcommand("replay", "replay placement policies over a trace");
    replay->add_option("trace", trace_path, "route trace")->required();
    std::vector<double> gpu_mib;
    double host_mib = 0;
    std::string policy = "all", profile_path, model_path, svg_path;
    aff::trace::ReplayOptions ro;
    replay->add_option("--gpu-mib", gpu_mib, "GPU expert-slab capacities in MiB, comma-separated")->required()->delimiter(',');
    replay->add_option("--host-mib", host_mib, "pinned host pool in MiB (default 0)");
    replay->add_option("--policy", policy, "heat, demand, static, lru, lfu, belady or all (default all)");
    replay->add_option("--expert-profile", profile_path, "initial placement from this profile file");
    replay->add_option("--model", model_path, "initial placement from this container's embedded profile");
    replay->add_option("--expert-bytes", ro.expert_bytes, "bytes of one expert (default: the trace's)");
    replay->add_option("--token-weight", ro.heat.token_weight,
                       "heat: a dispatch credits tokens^W, 1 by tokens, 0 once (default 0.5)");
    // The knobs aff-run and aff-serve take, under the same names (and replay's older ones).
    aff::cli::add_placement_knobs(*replay, ro.heat, true);
    replay->add_option("--hbm-gbps", ro.bandwidths.hbm_gbps, "GPU memory read bandwidth, GB/s (default 4478)");
    replay->add_option("--pcie-gbps", ro.bandwidths.pcie_gbps, "host-device link bandwidth, GB/s (default 55.4)");
    replay->add_option("--ssd-gbps", ro.bandwidths.ssd_gbps, "SSD read bandwidth, GB/s (default 7)");
    replay->add_option("--svg", svg_path, "write the hit-rate-vs-GPU-memory curve to this SVG file, and as a PNG beside it (.svg replaced by .png) where built with libpng");
    replay->get_option("--model")->excludes("--expert-profile");

    CLI::App* synth = app.add_subcommand("synth", "write a synthetic trace of a named family");
    std::string family = "v4flash", out_path, compression = "zstd";
    std::uint64_t seed = 1;
    std::uint32_t sequences = 0, decode_tokens = 0;
    synth->add_option("--family", family, "v4flash, drift, bursty, uniform or tiny (default v4flash)");
    synth->add_option("--out", out_path, "the trace to write")->required();
    synth->add_option("--seed", seed, "random seed (default 1)");
    synth->add_option("--sequences", sequences, "sequences (default: the family's)");
    synth->add_option("--decode-tokens", decode_tokens, "decode tokens a sequence (default: the family's)");
    synth->add_option("--compression", compression, "none or zstd (default zstd)");
    double zipf_s = -1, floor_share = -1, drift = -1;
    synth->add_option("--zipf-s", zipf_s, "popularity exponent of the learned layers (default: the family's)");
    synth->add_option("--floor", floor_share, "uniform share of every selection (default: the family's)");
    synth->add_option("--drift", drift, "rank swaps per layer per step (default: the family's)");

    return aff::cli::run(app, argc, argv, [&] {
        if (summary->parsed()) {
            const aff::trace::TraceSummary s = aff::trace::summarize(aff::trace::read_route_trace(trace_path));
            if (common.json) std::cout << aff::trace::summary_json(s).dump(1) << '\n';
            else aff::trace::write_summary_text(std::cout, s);
            return aff::cli::exit_ok;
        }
        if (synth->parsed()) {
            if (compression != "none" && compression != "zstd") aff::throw_usage("--compression must be none or zstd");
            aff::trace::SyntheticParams p = aff::trace::synthetic_family(family);
            p.seed = seed;
            if (sequences) p.sequences = sequences;
            if (decode_tokens) p.decode_tokens = decode_tokens;
            if (zipf_s >= 0) p.zipf_s = zipf_s;
            if (floor_share >= 0) p.floor = floor_share;
            if (drift >= 0) p.drift_swaps = drift;
            const aff::trace::RouteTrace t = aff::trace::synthesize(p);
            aff::trace::write_route_trace(out_path, t, compression == "none" ? aff::trace::Compression::none : aff::trace::Compression::zstd);
            if (!common.quiet)
                std::cerr << "aff-trace: wrote " << out_path << ": " << t.steps.size() << " steps, " << t.token_steps() << " tokens\n";
            return aff::cli::exit_ok;
        }
        const aff::trace::RouteTrace t = aff::trace::read_route_trace(trace_path);
        for (double mib : gpu_mib) {
            if (!(mib >= 0) || !std::isfinite(mib)) aff::throw_usage("--gpu-mib values must be finite and not negative");
            ro.gpu_bytes.push_back(static_cast<std::uint64_t>(mib * 1048576.0));
        }
        if (!(host_mib >= 0) || !std::isfinite(host_mib)) aff::throw_usage("--host-mib must be finite and not negative");
        ro.host_bytes = static_cast<std::uint64_t>(host_mib * 1048576.0);
        if (policy == "all") for (std::string_view p : aff::placement::policy_names()) ro.policies.emplace_back(p);
        else ro.policies = {policy};
        if (!profile_path.empty())
            ro.profile = aff::trace::placement_counts(aff::quant::ExpertProfile::read_file(profile_path), t.header);
        if (!model_path.empty())
            ro.profile = aff::trace::placement_counts(aff::trace::container_profile(model_path), t.header);
        const auto results = aff::trace::replay(t, ro);
        if (!svg_path.empty()) {
            const std::string svg = aff::trace::hit_rate_svg(results, "GPU hit rate: " + trace_path);
            aff::write_file_atomically(svg_path, std::span(reinterpret_cast<const std::uint8_t*>(svg.data()), svg.size()));
            if (aff::trace::hit_rate_png_available())
                aff::write_file_atomically(aff::trace::png_beside(svg_path), aff::trace::hit_rate_png(results, "GPU hit rate: " + trace_path));
            else if (!common.quiet)
                std::cerr << "aff-trace: no PNG beside the SVG (this build has no libpng)\n";
        }
        if (common.json) std::cout << aff::trace::replay_json(results, ro.bandwidths).dump(1) << '\n';
        else aff::trace::write_replay_text(std::cout, results, ro.bandwidths);
        return aff::cli::exit_ok;
    });
}
