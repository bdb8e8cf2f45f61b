// Single-dash words on a command line, checked before CLI11 sees them. CLI11 reads
// "-ngl 99" (llama.cpp's GPU-layers flag) as "-n gl" and then fails on a range check
// with a 300-digit bound; users of other tools type such words often. Here a word of
// one dash and several letters is accepted only where CLI11 would read it as meant:
// flags run together (-qh) or one letter with a number after it (-n32, -t4). Anything
// else is refused with one line naming the word, what it would have meant and what to
// use instead. A tool may also map a few such words to its long options (-cnv to --chat).
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

namespace aff::cli {

// Words such as "-cnv" and the long option each stands for.
using SingleDashAliases = std::map<std::string, std::string>;

// Returns args with aliases replaced; throws aff::Error (usage) for a refused word.
// Words after "--" and words that are values of the option before them are left alone.
std::vector<std::string> check_single_dash(const CLI::App& app, const std::vector<std::string>& args,
                                           const SingleDashAliases& aliases = {});

}  // namespace aff::cli
