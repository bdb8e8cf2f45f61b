// The single-dash check (see single_dash.hpp).
#include "libaff/ui/single_dash.hpp"

#include "libaff/core/error.hpp"

#include <cctype>
#include <cstdlib>

namespace aff::cli {
namespace {

bool is_number(const std::string& s) {
    if (s.empty()) return false;
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size();
}

// Option names of other tools that users bring with them, and what aff says instead.
std::string hint_for(const std::string& word) {
    if (word == "-ngl")
        return "; aff places the layers itself: --gpus N picks the GPUs (0 = the CPU), --gpu-mib MIB caps their memory";
    if (word == "-fa") return "; aff's attention kernels need no switch";
    if (word == "-np") return "; aff-serve runs one sequence at a time and queues the rest (--queue-size)";
    return "";
}

bool takes_value(const CLI::Option& opt) { return opt.get_type_size_max() > 0 && opt.get_expected_min() > 0; }

}  // namespace

std::vector<std::string> check_single_dash(const CLI::App& app, const std::vector<std::string>& args,
                                           const SingleDashAliases& aliases) {
    std::vector<std::string> out;
    out.reserve(args.size());
    bool value_next = false;  // the word before was an option that takes a value
    bool rest_positional = false;
    for (const std::string& word : args) {
        if (rest_positional || value_next) {
            out.push_back(word);
            value_next = false;
            continue;
        }
        if (word == "--") {
            rest_positional = true;
            out.push_back(word);
            continue;
        }
        if (auto a = aliases.find(word); a != aliases.end()) {
            out.push_back(a->second);
            const CLI::Option* opt = app.get_option_no_throw(a->second);
            value_next = opt && takes_value(*opt);
            continue;
        }
        if (word.rfind("--", 0) == 0) {
            const CLI::Option* opt = word.find('=') == std::string::npos ? app.get_option_no_throw(word) : nullptr;
            value_next = opt && takes_value(*opt);
            out.push_back(word);
            continue;
        }
        if (word.size() < 2 || word[0] != '-' || !std::isalpha(static_cast<unsigned char>(word[1]))) {
            out.push_back(word);  // a positional argument, a negative number, "-"
            continue;
        }
        // -x or a cluster: flags, then at most one option taking the rest as its value.
        for (std::size_t i = 1; i < word.size(); ++i) {
            const CLI::Option* opt = app.get_option_no_throw(std::string("-") + word[i]);
            const std::string rest = word.substr(i + 1);
            if (opt && !takes_value(*opt)) continue;
            if (opt && rest.empty()) {
                value_next = true;
                break;
            }
            if (opt && is_number(rest)) break;
            std::string meaning = opt ? " (one dash takes one letter: this would read as -" + std::string(1, word[i]) +
                                            " " + rest + ")"
                                      : "";
            throw_usage(word + ": not an " + app.get_name() + " option" + meaning + hint_for(word));
        }
        out.push_back(word);
    }
    return out;
}

}  // namespace aff::cli
