// aff-verify: checks a SHA256SUMS file (-c, like sha256sum -c, files hashed in
// parallel), a container's structure and every tensor digest, or the parts of a split
// as their concatenation (--parts) without writing it. Exit 0 only if everything
// checks. The checks are libaff/container/verify.cpp (and, for a model container, its
// completeness against its config: libaff/model/completeness.hpp); this file maps flags.
#include "libaff/container/verify.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/completeness.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Verify an .aff container, the parts of a split, or a SHA256SUMS file.", "aff-verify"};
    std::string input, sums, parts;
    aff::SumsOptions sums_opt;
    aff::PartsOptions parts_opt;
    auto* file_opt = app.add_option("file", input, "an .aff container: check its structure and every tensor digest");
    auto* check_opt = app.add_option("-c,--check", sums, "check the files a SHA256SUMS file lists");
    auto* parts_flag = app.add_option("--parts", parts, "check the parts of a split (any one part) as their concatenation");
    app.add_flag("--ignore-missing", sums_opt.ignore_missing, "with -c: skip files that do not exist");
    app.add_option("--sums", parts_opt.sums_path, "with --parts: the SHA256SUMS to check against (default: beside the parts)");
    std::size_t& threads = aff::cli::add_threads(app);
    file_opt->excludes(check_opt)->excludes(parts_flag);
    check_opt->excludes(parts_flag);
    const aff::cli::Common& common = aff::cli::add_common(app);
    return aff::cli::run(app, argc, argv, [&] {
        auto progress = common.progress();
        auto finish = [&](const auto& report) {
            if (common.json) std::cout << aff::to_json(report).dump(2) << '\n';
            else aff::write_text(std::cout, report);
            if (report.ok()) return aff::cli::exit_ok;
            aff::cli::print_error("aff-verify", aff::failure_summary(report));
            return aff::cli::exit_failure;
        };
        if (!sums.empty()) {
            sums_opt.threads = threads;
            const aff::SumsReport r = aff::check_sha256sums(sums, sums_opt, *progress);
            for (const aff::FileCheck& f : r.files)
                if (!f.detail.empty()) aff::cli::print_error("aff-verify", f.path + ": " + f.detail);
            return finish(r);
        }
        if (!parts.empty()) {
            parts_opt.threads = threads;
            return finish(aff::verify_parts(parts, parts_opt, *progress));
        }
        if (input.empty()) aff::throw_usage("give a container FILE, -c SHA256SUMS or --parts PART");
        const aff::ContainerReport report = aff::verify_container(input, threads, *progress);
        // Digests can all match in a container aff-run could not load (a tensor or the
        // codebook left out): a model container must also be complete against its config.
        if (report.ok()) {
            const aff::Completeness c = aff::check_container_complete(input);
            if (c == aff::Completeness::draft)
                progress->note("aff-verify: a draft container: its completeness against the config is not checked");
            else if (c != aff::Completeness::complete)
                progress->note("aff-verify: no DeepSeek-V4 config in the metadata: completeness is not checked");
        }
        return finish(report);
    });
}
