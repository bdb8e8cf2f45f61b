// The live view of a run (--ui auto|dash|plain): a thread that reads the StatsBoard and
// either draws the dashboard on standard error's terminal at 5 Hz (dash_layout.hpp,
// curses_screen.hpp) or prints one plain stats line per interval while figures change,
// and one at the end (figures_text.hpp). It never runs on the compute thread: the run
// only writes the board. auto picks the dash on a terminal and lines otherwise; dash
// refuses to start without a terminal rather than fall back; plain always prints lines.
//
// While the dash owns the terminal, text meant for the terminal is routed around it:
// the generated text (output()) is shown in the Output panel and printed when the view
// closes (when stdout is a terminal; a piped stdout gets it at once), and stderr lines
// (log()) go to the Log panel. q or Ctrl-C close the view, restore the terminal, print
// the held text and then stop the process as SIGINT does (status 130).
#pragma once

#include "libaff/ui/cli.hpp"
#include "libaff/ui/stats.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace aff::ui {

enum class UiMode { auto_detect, dash, plain };
// "auto", "dash", "plain"; throws aff::Error (usage) on anything else.
UiMode parse_ui_mode(const std::string& text);

struct LiveViewOptions {
    UiMode mode = UiMode::auto_detect;
    int interval_ms = 1000;  // plain lines; the dash redraws every 200 ms
    bool quiet = false;      // no plain lines (an explicit --ui dash still draws)
    bool gpu_panel = true;   // look for NVML / ROCm SMI
    // Called on the view's thread after q or Ctrl-C, once the terminal is restored and the
    // held text printed. The default raises SIGINT (the tools' handler exits with 130).
    std::function<void()> on_quit;
};

// The options of --ui and --ui-interval-ms (cli::add_ui) and --quiet.
LiveViewOptions live_view_options(const cli::Ui& ui, bool quiet);

class CursesScreen;

class LiveView {
public:
    // Throws aff::Error (usage) for --ui dash without a usable terminal.
    LiveView(StatsBoard& board, LiveViewOptions options);
    ~LiveView();
    LiveView(const LiveView&) = delete;
    LiveView& operator=(const LiveView&) = delete;

    bool dash() const { return screen_ != nullptr; }
    // Generated text for stdout (see above).
    void output(const std::string& text);
    // A line for stderr (see above); without a trailing newline.
    void log(const std::string& line);
    // Ends the view: the dash closes and prints the held text; plain prints its last line.
    // Idempotent; the destructor calls it.
    void stop();

private:
    void run_dash();
    void run_plain();
    void sample_gpus();
    void close_and_flush();

    StatsBoard& board_;
    LiveViewOptions options_;
    std::unique_ptr<CursesScreen> screen_;
    bool hold_output_ = false;
    std::mutex mutex_;  // held_, and the screen's closing
    std::condition_variable wake_;
    std::string held_;
    std::atomic<bool> stopping_{false};
    bool stopped_ = false;
    bool gpu_tried_ = false;
    std::thread thread_;
};

}  // namespace aff::ui
