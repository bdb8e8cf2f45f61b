// aff-info: what is inside an .aff container (geometry, sizes by class, expert bits per
// weight, profile, codebook, provenance), as text or one JSON object; --tensors lists
// the directory. Reads the directory only, never tensor bytes (no hashing).
// The work is libaff/container/info.cpp; this file maps flags to it.
#include "libaff/container/container.hpp"
#include "libaff/container/info.hpp"
#include "libaff/ui/cli.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"Show what an .aff container holds.", "aff-info"};
    std::string input;
    bool tensors = false;
    app.add_option("file", input, "the .aff container")->required();
    app.add_flag("--tensors", tensors, "list every tensor of the directory");
    const aff::cli::Common& common = aff::cli::add_common(app);
    return aff::cli::run(app, argc, argv, [&] {
        const aff::Container c = aff::Container::open(input);
        const aff::ContainerSummary summary = aff::summarize(c);
        if (common.json) {
            nlohmann::json j = aff::summary_json(summary);
            if (tensors) j["tensor_list"] = aff::tensor_table_json(c);
            std::cout << j.dump(2) << '\n';
        } else if (tensors) {
            aff::write_tensor_table(std::cout, c);
        } else {
            aff::write_summary_text(std::cout, summary);
        }
        return aff::cli::exit_ok;
    });
}
