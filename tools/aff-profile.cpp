// aff-profile: makes an expert-popularity profile from a llama.cpp imatrix's per-expert
// counts or from a route trace's selections (libaff/trace/profile_from_trace), or reads a profile file, and prints per-layer summaries and the busiest
// experts (text or --json); --out writes the standalone profile file
// (formats/expert-profile.md). The work is libaff/quant/expert_profile.cpp.
#include "libaff/core/error.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/quant/imatrix.hpp"
#include "libaff/trace/profile_from_trace.hpp"
#include "libaff/trace/route_trace.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Make, read and print expert-popularity profiles.", "aff-profile"};
    std::string input, imatrix, from_trace, out;
    std::uint32_t layers = 0, top = 8;
    app.add_option("profile", input, "a profile file to read and print");
    app.add_option("--imatrix", imatrix, "make the profile from this llama.cpp imatrix (GGUF)");
    app.add_option("--from-trace", from_trace, "make the profile from this route trace's selections");
    app.add_option("--out", out, "write the profile to this file");
    app.add_option("--layers", layers, "keep layers below N (default: every layer the imatrix has)");
    app.add_option("--top", top, "print the N busiest experts of each layer (0: none)");
    const aff::cli::Common& common = aff::cli::add_common(app);
    return aff::cli::run(app, argc, argv, [&] {
        if (int(!input.empty()) + int(!imatrix.empty()) + int(!from_trace.empty()) != 1)
            aff::throw_usage("give one of: a profile file, --imatrix FILE, --from-trace FILE");
        auto progress = common.progress();
        aff::quant::ExpertProfile profile;
        if (!imatrix.empty()) {
            aff::quant::ProfileFromImatrixReport report;
            profile = aff::quant::profile_from_imatrix(aff::quant::read_imatrix(imatrix), layers, &report);
            if (!report.unmatched.empty())
                progress->note("warning: " + std::to_string(report.unmatched.size()) +
                               " imatrix tensors match no DeepSeek-V4 tensor (first: " + report.unmatched.front() +
                               "); was it made for another model?");
            if (!report.ignored_layers.empty())
                progress->note("ignored expert tensors of " + std::to_string(report.ignored_layers.size()) +
                               " layers at or past --layers " + std::to_string(layers));
        } else if (!from_trace.empty()) {
            profile = aff::trace::profile_from_trace(aff::trace::read_route_trace(from_trace));
        } else {
            profile = aff::quant::ExpertProfile::read_file(input);
        }
        if (!out.empty()) profile.write_file(out);
        if (common.json) std::cout << aff::quant::profile_json(profile, top).dump(2) << '\n';
        else aff::quant::write_profile_text(std::cout, profile, top);
        return aff::cli::exit_ok;
    });
}
