// The shared options and exit-status handling of every tool (see cli.hpp).
#include "libaff/ui/cli.hpp"

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/crash_report.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/printable.hpp"
#include "libaff/runtime/open_sequence.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <deque>
#include <fcntl.h>
#include <iostream>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

namespace aff::cli {
namespace {

std::deque<Common> g_common;  // stable addresses for the options' storage
std::deque<std::size_t> g_threads;
std::deque<Gpu> g_gpu;
std::deque<Ui> g_ui;
std::deque<DraftChoice> g_draft;
std::atomic<void (*)()> g_terminal_restore{nullptr};

void restore_terminal() {
    if (void (*restore)() = g_terminal_restore.exchange(nullptr)) restore();
}

// SIGINT, and SIGTERM and SIGHUP (a service manager stopping us, a closed terminal), must
// not leave a temporary or half a set of outputs behind: the handler removes them and
// ends the process with 128 + the signal's number, the status a shell reports for it.
extern "C" void on_termination(int sig) {
    restore_terminal();
    remove_registered_temporaries();
    ::_exit(128 + sig);
}

// on_stop_signal's self-pipe: the handler only writes the signal's number to it.
int g_stop_pipe[2] = {-1, -1};
std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop(int sig) {
    if (g_stop_requested.exchange(true)) on_termination(sig);
    const unsigned char c = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t n = ::write(g_stop_pipe[1], &c, 1);
}

}  // namespace

void on_stop_signal(std::function<void(int signal)> on_stop_fn) {
    if (g_stop_pipe[0] < 0 && ::pipe2(g_stop_pipe, O_CLOEXEC) != 0) throw_errno("cannot create pipe", "signals", errno);
    std::thread([fn = std::move(on_stop_fn)] {
        unsigned char c = 0;
        while (::read(g_stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
        }
        fn(c);
    }).detach();
    std::signal(SIGINT, on_stop);
    std::signal(SIGTERM, on_stop);
}

std::unique_ptr<Progress> Common::progress() const {
    ui::ProgressMode mode = ui::ProgressMode::auto_detect;
    if (progress_mode == "always") mode = ui::ProgressMode::always;
    else if (progress_mode == "never") mode = ui::ProgressMode::never;
    return ui::make_progress(mode, quiet);
}

Common& add_common(CLI::App& app, bool with_json) {
    Common& c = g_common.emplace_back();
    if (with_json) app.add_flag("--json", c.json, "print the result as one JSON object");
    app.add_option("--progress", c.progress_mode, "show progress: auto (on a terminal), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->default_str("auto");
    app.add_flag("-q,--quiet", c.quiet, "print nothing on stderr but errors");
    app.set_version_flag("--version", std::string(app.get_name()) + " " + AFF_VERSION);
    return c;
}

std::size_t& add_threads(CLI::App& app) {
    std::size_t& t = g_threads.emplace_back(0);
    // A typo such as -t 100000 would start that many threads and exhaust the machine's
    // process table: more than 4 x the hardware threads is refused.
    const std::size_t most = 4 * std::max(1u, std::thread::hardware_concurrency());
    app.add_option("-t,--threads", t, "worker threads (0 = one per hardware thread)")
        ->default_str("0")
        ->check(CLI::Validator(
            [most](const std::string& text) -> std::string {
                std::size_t n = 0;
                const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
                if (ec != std::errc() || end != text.data() + text.size()) return "expected a whole number, got " + text;
                if (n > most)
                    return text + " threads is more than 4 x the " + std::to_string(most / 4) +
                           " hardware threads (at most " + std::to_string(most) + ")";
                return {};
            },
            "N"));
    return t;
}

namespace {

std::string format_bound(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// A whole value: strtod/strtoll must consume all of it, and the number must be finite.
bool parse_number(const std::string& text, double& v) {
    if (text.empty()) return false;
    char* end = nullptr;
    v = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size() && std::isfinite(v);
}

}  // namespace

Gpu& add_gpu(CLI::App& app) {
    Gpu& g = g_gpu.emplace_back();
    app.add_option("--gpus", g.gpus, "GPUs to use (0 = the CPU; default: one when a GPU is visible)")
        ->check(whole_number_at_least(0))
        ->default_str("auto");
    app.add_option("--gpu-mib", g.gpu_mib, "cap on the GPU memory used, in MiB (0 = all free memory)")
        ->check(whole_number_at_least(0))
        ->default_str("0");
    app.add_option("--gpu-expert-mib", g.gpu_expert_mib,
                   "tier the routed experts with a GPU slab of at most this many MiB (default: tiers only when the model does not fit)")
        ->check(whole_number_at_least(0));
    app.add_option("--gpu-headroom-mib", g.gpu_headroom_mib,
                   "GPU memory the expert tiers leave free, in MiB (default: 256 or 3 % of the GPU, whichever is more)")
        ->check(whole_number_at_least(0));
    app.add_option("--host-pool-mib", g.host_pool_mib,
                   "pinned host pool for routed experts, in MiB (default: MemAvailable less the reserve)")
        ->check(whole_number_at_least(0));
    app.add_option("--host-pool-reserve-mib", g.host_pool_reserve_mib, "host memory the pool leaves to the system, in MiB")
        ->check(whole_number_at_least(0))
        ->default_str("1536");
    app.add_option("--placement-strategy", g.placement_strategy,
                   "how the mover places tiered experts between calls: heat, demand, static (nothing moves), lru, lfu")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                for (const char* name : {"heat", "demand", "static", "lru", "lfu"})
                    if (text == name) return {};
                return "expected heat, demand, static, lru or lfu, got \"" + text + "\"";
            },
            "NAME", "placement strategy"))
        ->default_str("heat");
    app.add_option("--expert-profile", g.expert_profile,
                   "expert profile (aff-profile) ordering the tiered experts' initial placement (default: the container's)")
        ->check(CLI::ExistingFile);
    app.add_option("--expert-prefetch", g.expert_prefetch,
                   "tiered decode: pooled experts a layer copied into GPU memory while its attention runs, chosen from "
                   "the layer's predicted routing (0 = off; not with experts on the SSD)")
        ->check(whole_number_between(0, 64))
        ->default_str("1");
    app.add_option("--draft-placement", g.draft_placement,
                   "where the MTP draft's routed experts live on the GPU: vram, ram (pinned host memory read over the "
                   "bus), auto (vram unless the trunk's experts are tiered); the CPU path ignores it")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                for (const char* name : {"auto", "vram", "ram"})
                    if (text == name) return {};
                return "expected auto, vram or ram, got \"" + text + "\"";
            },
            "WHERE", "draft placement"))
        ->default_str("auto");
    add_placement_knobs(app, g.heat);
    return g;
}

void add_placement_knobs(CLI::App& app, placement::HeatOptions& heat, bool replay_aliases) {
    const placement::HeatOptions d = heat;
    auto names = [replay_aliases](const char* name, const char* alias) {
        return replay_aliases ? std::string(name) + "," + alias : std::string(name);
    };
    app.add_option(names("--placement-moves", "--max-moves"), heat.max_moves,
                   "heat mover: admissions into the GPU slab a dispatch (one layer of one call) at most")
        ->check(whole_number_between(1, 4096))
        ->default_str(std::to_string(d.max_moves));
    app.add_option(names("--placement-decay", "--half-life"), heat.half_life_steps,
                   "heat mover: steps after which an unused expert's heat has halved")
        ->check(number_above(0))
        ->default_str(format_bound(d.half_life_steps));
    app.add_option(names("--placement-hysteresis", "--hysteresis"), heat.hysteresis,
                   "heat mover: fraction by which a candidate's heat must exceed its victim's")
        ->check(number_at_least(0))
        ->default_str(format_bound(d.hysteresis));
    app.add_option(names("--placement-min-gain", "--min-gain"), heat.min_gain,
                   "heat mover: heat (tokens) by which a candidate must exceed its victim at least")
        ->check(number_at_least(0))
        ->default_str(format_bound(d.min_gain));
    app.add_option(names("--placement-lead", "--lead-limit"), heat.lead_limit,
                   "heat mover: cap on an expert's heat, so an old favourite loses its lead in bounded time")
        ->check(number_above(0))
        ->default_str(format_bound(d.lead_limit));
    app.add_option(names("--placement-shadow", "--shadow-slots"), heat.shadow_slots,
                   "heat mover: copies in flight at once (bounds the admissions a dispatch with --placement-moves)")
        ->check(whole_number_between(1, 4096))
        ->default_str(std::to_string(d.shadow_slots));
}

void set_backend(const Gpu& g, BackendOptions& out) {
    out.heat = g.heat;
    out.gpus = g.gpus;
    out.gpu_mib = g.gpu_mib;
    out.gpu_expert_mib = g.gpu_expert_mib;
    out.gpu_headroom_mib = g.gpu_headroom_mib;
    out.host_pool_mib = g.host_pool_mib;
    out.host_pool_reserve_mib = g.host_pool_reserve_mib;
    out.placement_strategy = g.placement_strategy;
    out.expert_profile = g.expert_profile;
    out.draft_placement = g.draft_placement;
    out.expert_prefetch = g.expert_prefetch;
}


CLI::Validator whole_number_at_least(long long min) {
    return CLI::Validator(
        [min](std::string& text) -> std::string {
            long long v = 0;
            const auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (text.empty() || ec != std::errc() || at != text.data() + text.size() || v < min)
                return "expected a whole number >= " + std::to_string(min) + ", got \"" + text + "\"";
            return {};
        },
        "INT>=" + std::to_string(min), "whole number");
}

CLI::Validator whole_number_between(long long min, long long max) {
    return CLI::Validator(
        [min, max](std::string& text) -> std::string {
            long long v = 0;
            const auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (text.empty() || ec != std::errc() || at != text.data() + text.size() || v < min || v > max)
                return "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", got \"" +
                       text + "\"";
            return {};
        },
        "INT in [" + std::to_string(min) + ", " + std::to_string(max) + "]", "whole number range");
}

namespace {

// A number (finite, the whole text) that `ok` accepts; otherwise "expected a number <what>".
CLI::Validator number_where(std::function<bool(double)> ok, const std::string& what, const std::string& name,
                            const char* description) {
    return CLI::Validator(
        [ok, what](std::string& text) -> std::string {
            double v = 0;
            if (!parse_number(text, v) || !ok(v)) return "expected a number " + what + ", got \"" + text + "\"";
            return {};
        },
        name, description);
}

}  // namespace

CLI::Validator number_at_least(double min) {
    return number_where([min](double v) { return v >= min; }, ">= " + format_bound(min), "NUMBER>=" + format_bound(min),
                        "number");
}

CLI::Validator number_above(double min) {
    return number_where([min](double v) { return v > min; }, "above " + format_bound(min), "NUMBER>" + format_bound(min),
                        "number");
}

CLI::Validator number_between(double min, double max) {
    return number_where([min, max](double v) { return v >= min && v <= max; },
                        "from " + format_bound(min) + " to " + format_bound(max),
                        "NUMBER in [" + format_bound(min) + ", " + format_bound(max) + "]", "number range");
}

DraftChoice& add_draft(CLI::App& app) {
    DraftChoice& d = g_draft.emplace_back();
    app.add_option_function<std::string>(
           "--draft", [&d](const std::string& mode) { d.mode = parse_draft_mode(mode); },
           "speculative decoding: auto (the DSpark stages when the model has them, else its MTP layer), mtp, dspark, "
           "off")
        ->check(CLI::IsMember({"auto", "mtp", "dspark", "off"}))
        ->default_str("auto");
    app.add_option("--draft-model", d.model_path,
                   "the draft container (the mtp.* stages) to pair with a main .aff container; default: "
                   "<model>.dspark.aff beside it, when there")
        ->type_name("FILE");
    app.add_option("--draft-memory", d.memory,
                   "where --draft auto keeps what it measured for the next run on the same model, drafts and backend "
                   "(off: nowhere); default: a file in $AFF_CACHE_DIR, $XDG_CACHE_HOME/aff or ~/.cache/aff")
        ->type_name("FILE|off");
    app.add_option("--draft-max", d.max_tokens, "draft tokens one verify call checks at most")
        ->check(whole_number_between(1, static_cast<long long>(max_draft_tokens)))
        ->default_str(std::to_string(d.max_tokens));
    return d;
}

Ui& add_ui(CLI::App& app) {
    Ui& u = g_ui.emplace_back();
    app.add_option("--ui", u.mode, "live view: auto (the dashboard on a terminal, stats lines otherwise), dash, plain")
        ->check(CLI::IsMember({"auto", "dash", "plain"}))
        ->default_str("auto");
    app.add_option("--ui-interval-ms", u.interval_ms, "milliseconds between plain stats lines")
        ->check(CLI::Range(10, 3600000))
        ->default_str("1000");
    return u;
}

void set_terminal_restore(void (*restore)()) { g_terminal_restore = restore; }

void print_error(const std::string& tool, const std::string& message) {
    std::fflush(stdout);
    // Messages quote names and values read from files: never let their bytes drive the terminal.
    std::fprintf(stderr, "%s: %s\n", tool.c_str(), printable(message).c_str());
}

int run(CLI::App& app, int argc, char** argv, const std::function<int()>& body, const SingleDashAliases& aliases) {
    const std::string tool = app.get_name();
    try {
        std::vector<std::string> args;
        try {
            args = check_single_dash(app, std::vector<std::string>(argv + 1, argv + argc), aliases);
        } catch (const Error& e) {
            print_error(tool, e.what());
            std::fprintf(stderr, "Run '%s --help' for usage.\n", tool.c_str());
            return exit_usage;
        }
        std::reverse(args.begin(), args.end());  // CLI11 takes the words last first
        app.parse(args);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        print_error(tool, e.what());
        std::fprintf(stderr, "Run '%s --help' for usage.\n", tool.c_str());
        return exit_usage;
    }
    std::signal(SIGINT, on_termination);
    std::signal(SIGTERM, on_termination);
    std::signal(SIGHUP, on_termination);
    std::signal(SIGPIPE, SIG_IGN);
    static std::string crash_name;  // the handler reads it after run() may have returned
    crash_name = tool;
    install_crash_report(crash_name.c_str(), restore_terminal);
    int status = exit_failure;
    try {
        status = body();
    } catch (const Error& e) {
        print_error(tool, e.what());
        status = e.kind() == ErrorKind::usage ? exit_usage : exit_failure;
    } catch (const std::exception& e) {
        print_error(tool, std::string("internal error: ") + e.what());
        status = exit_failure;
    }
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout.good()) {
        if (errno != EPIPE) {
            std::fprintf(stderr, "%s: cannot write to standard output\n", tool.c_str());
            return exit_failure;
        }
    }
    return status;
}

}  // namespace aff::cli
