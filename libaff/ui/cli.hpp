// What every aff tool shares: the common options (declared once so they are spelled
// the same everywhere, with units in their names), and run(), which parses, installs
// the signal handlers (SIGINT, SIGTERM and SIGHUP remove unfinished outputs'
// temporaries; a crash prints its stack, crash_report.hpp), runs the tool's body and maps
// the outcome to an exit status:
//   0 success, 1 failure (one line on stderr), 2 bad usage, 130 interrupted (SIGINT),
//   143 terminated (SIGTERM), 129 hung up (SIGHUP).
// Error lines pass through printable(): bytes read from files never reach the terminal raw.
// Finally it flushes stdout and fails on a write error (a full disk must not pass
// silently; a closed pipe is not an error).
#pragma once

#include "libaff/core/progress.hpp"
#include "libaff/placement/policy.hpp"
#include "libaff/runtime/draft_choice.hpp"
#include "libaff/ui/progress_reporter.hpp"
#include "libaff/ui/single_dash.hpp"

#include <CLI/CLI.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace aff {
struct BackendOptions;  // libaff/runtime/open_sequence.hpp
}

namespace aff::cli {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr int exit_interrupted = 130;
constexpr int exit_terminated = 143;

struct Common {
    bool json = false;
    bool quiet = false;
    std::string progress_mode = "auto";
    std::unique_ptr<Progress> progress() const;
};

// Adds --json, --progress and --quiet (and --version for the app).
Common& add_common(CLI::App& app, bool with_json = true);
// Adds --threads N (0 = one per hardware thread); returns the variable it fills.
std::size_t& add_threads(CLI::App& app);

struct Gpu {
    int gpus = -1;             // -1: a GPU when one is visible; 0: the CPU; N: N GPUs
    std::size_t gpu_mib = 0;   // device memory cap in MiB; 0 = all free memory
    // The expert tiers (libaff/gpu/expert_tiers.hpp); unset: derived.
    std::optional<std::size_t> gpu_expert_mib, gpu_headroom_mib, host_pool_mib;
    std::size_t host_pool_reserve_mib = 1536;
    std::string placement_strategy = "heat";
    placement::HeatOptions heat = placement::gpu_mover_heat_options();  // add_placement_knobs
    std::string expert_profile;  // --expert-profile FILE
    std::string draft_placement = "auto";  // --draft-placement auto|vram|ram
    int expert_prefetch = 1;  // --expert-prefetch N: pooled experts a layer copied during attention
};
// Adds --gpus N, --gpu-mib MIB and the expert tiers' options (--gpu-expert-mib,
// --gpu-headroom-mib, --host-pool-mib, --host-pool-reserve-mib, --placement-strategy,
// --expert-profile, --expert-prefetch, --draft-placement and the knobs of add_placement_knobs); returns the
// struct they fill.
Gpu& add_gpu(CLI::App& app);

// Adds the heat policy's knobs (placement::HeatOptions), each validated so that a bad value is
// one line naming the option: --placement-moves N (admissions a dispatch, 1..4096),
// --placement-decay STEPS (heat halves every this many steps, > 0), --placement-hysteresis F
// (fraction a candidate must beat its victim by, >= 0), --placement-min-gain H (heat it must
// beat it by, >= 0), --placement-lead H (cap on an expert's heat, > 0), --placement-shadow N
// (copies in flight at once, 1..4096). aff-run and aff-serve take them (add_gpu); aff-trace
// replay takes them too, with its older names as aliases (replay_aliases: --max-moves,
// --half-life, --hysteresis, --min-gain, --lead-limit, --shadow-slots). The defaults shown
// are `heat`'s values when the options are added: the GPU mover's for aff-run and aff-serve,
// HeatOptions{} for replay (placement/policy.hpp says why they differ).
void add_placement_knobs(CLI::App& app, placement::HeatOptions& heat, bool replay_aliases = false);
// The backend's options from them (--gpus, --gpu-mib, the tiers').
void set_backend(const Gpu& gpu, BackendOptions& out);

struct Ui {
    std::string mode = "auto";  // --ui: auto, dash, plain (libaff/ui/live_view.hpp)
    int interval_ms = 1000;     // --ui-interval-ms: plain stats lines
};
// Adds --ui MODE and --ui-interval-ms MS; returns the struct they fill.
Ui& add_ui(CLI::App& app);

// Adds --draft MODE and --draft-max N (libaff/runtime/draft_choice.hpp); returns the choice
// they fill.
DraftChoice& add_draft(CLI::App& app);

// Checks of numeric option values whose messages name the bound plainly (CLI11's own
// open ranges print DBL_MAX): "expected a whole number >= 1, got \"gl\"".
CLI::Validator whole_number_at_least(long long min);
CLI::Validator whole_number_between(long long min, long long max);
CLI::Validator number_at_least(double min);
CLI::Validator number_above(double min);
CLI::Validator number_between(double min, double max);

// Parses argv (after the single-dash check, single_dash.hpp, with the tool's aliases)
// and runs body. body returns the exit status.
int run(CLI::App& app, int argc, char** argv, const std::function<int()>& body,
        const SingleDashAliases& aliases = {});

// A function the signal handlers call before the process ends (the live view restores
// the terminal with it); it must be async-signal-safe. nullptr clears it.
void set_terminal_restore(void (*restore)());

// For servers, called inside run()'s body: the first SIGINT or SIGTERM calls
// on_stop(signal) on a thread of its own (so it may block and take locks) instead of
// ending the process; a second one ends it at once with 128 + the signal's number.
void on_stop_signal(std::function<void(int signal)> on_stop);

// Prints "<tool>: <message>" on stderr; for warnings from tool mains.
void print_error(const std::string& tool, const std::string& message);

}  // namespace aff::cli
