// aff-split: cuts a large file into byte-exact parts FILE.part-00001-of-0000N that
// `cat` reassembles, and writes a SHA256SUMS for the parts and the whole file, reading
// the input once. The work is libaff/container/split.cpp; this file maps flags to it.
#include "libaff/container/split.hpp"
#include "libaff/core/hash.hpp"
#include "libaff/core/units.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Split a file into parts under a size limit, with a SHA256SUMS.", "aff-split"};
    std::string input, max_size = "48GiB";
    aff::SplitOptions opt;
    app.add_option("file", input, "the file to split")->required();
    app.add_option("--max-size", max_size, "largest part, e.g. 48GiB or 50G (default 48GiB)");
    app.add_option("-o,--output-dir", opt.output_dir, "where parts and SHA256SUMS go (default: beside FILE)");
    app.add_option("--sums", opt.sums_name, "name of the checksum file in the output directory (default SHA256SUMS)");
    app.add_flag("--dry-run", opt.dry_run, "print the parts that would be written; read and write nothing");
    const aff::cli::Common& common = aff::cli::add_common(app);
    return aff::cli::run(app, argc, argv, [&] {
        opt.max_size = aff::parse_size(max_size);
        auto progress = common.progress();
        const aff::SplitResult r = aff::split_file(input, opt, *progress);
        if (common.json) std::cout << aff::to_json(r).dump(2) << '\n';
        else aff::write_text(std::cout, r);
        progress->note("aff-split: " + aff::summary_line(r));
        return aff::cli::exit_ok;
    });
}
