// The live view's thread and its routing of text (see live_view.hpp).
#include "libaff/ui/live_view.hpp"

#include "libaff/core/error.hpp"
#include "libaff/ui/curses_screen.hpp"
#include "libaff/ui/dash_layout.hpp"
#include "libaff/ui/figures_text.hpp"
#include "libaff/ui/gpu_monitor.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <unistd.h>

namespace aff::ui {
namespace {

constexpr int dash_period_ms = 200;  // 5 Hz
constexpr int gpu_period_ms = 1000;

}  // namespace

UiMode parse_ui_mode(const std::string& text) {
    if (text == "auto") return UiMode::auto_detect;
    if (text == "dash") return UiMode::dash;
    if (text == "plain") return UiMode::plain;
    throw_usage("--ui: expected auto, dash or plain, got \"" + text + "\"");
}

LiveViewOptions live_view_options(const cli::Ui& ui, bool quiet) {
    LiveViewOptions o;
    o.mode = parse_ui_mode(ui.mode);
    o.interval_ms = ui.interval_ms;
    o.quiet = quiet;
    return o;
}

LiveView::LiveView(StatsBoard& board, LiveViewOptions options) : board_(board), options_(std::move(options)) {
    const bool want_dash = options_.mode == UiMode::dash ||
                           (options_.mode == UiMode::auto_detect && !options_.quiet && stderr_is_terminal());
    if (want_dash) {
        if (options_.mode == UiMode::dash) {
            screen_ = CursesScreen::open();  // throws: dash does not fall back
        } else {
            try {
                screen_ = CursesScreen::open();
            } catch (const Error&) {
                screen_.reset();  // auto: lines instead
            }
        }
    }
    hold_output_ = screen_ && ::isatty(STDOUT_FILENO) == 1;
    if (!options_.on_quit) options_.on_quit = [] { std::raise(SIGINT); };
    if (screen_) thread_ = std::thread([this] { run_dash(); });
    else if (!options_.quiet) thread_ = std::thread([this] { run_plain(); });
}

LiveView::~LiveView() { stop(); }

void LiveView::output(const std::string& text) {
    if (screen_) board_.add_output(text);
    {
        std::lock_guard lock(mutex_);
        if (hold_output_ && !stopped_) {
            held_ += text;
            return;
        }
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

void LiveView::log(const std::string& line) {
    {
        std::lock_guard lock(mutex_);
        if (screen_ && !stopped_) {
            board_.add_log(line);
            return;
        }
    }
    std::fprintf(stderr, "%s\n", line.c_str());
}

void LiveView::sample_gpus() {
    static std::unique_ptr<GpuMonitor> monitor;  // one per process: the libraries start once
    if (!options_.gpu_panel) return;
    if (!gpu_tried_) {
        gpu_tried_ = true;
        if (!monitor) monitor = GpuMonitor::open();
    }
    if (monitor) board_.publish_gpus(monitor->sample());
}

// Restores the terminal and prints what was held for it; once.
void LiveView::close_and_flush() {
    std::string text;
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        stopped_ = true;
        if (screen_) screen_->close();
        text = std::move(held_);
    }
    if (!text.empty()) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    }
}

void LiveView::run_dash() {
    using Clock = std::chrono::steady_clock;
    auto next_gpu = Clock::now();
    while (!stopping_) {
        if (Clock::now() >= next_gpu) {
            sample_gpus();
            next_gpu = Clock::now() + std::chrono::milliseconds(gpu_period_ms);
        }
        const Snapshot s = board_.snapshot();
        screen_->draw(render_dash(s, screen_->rows(), screen_->cols(), screen_->unicode()));
        if (screen_->wait_key(dash_period_ms) == CursesScreen::Key::quit) {
            close_and_flush();
            options_.on_quit();
            return;
        }
    }
}

void LiveView::run_plain() {
    std::uint64_t printed = board_.version();
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        wake_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [&] { return stopping_.load(); });
        if (stopping_) break;
        lock.unlock();
        sample_gpus();
        const std::uint64_t v = board_.version();
        if (v != printed) {
            printed = v;
            std::fprintf(stderr, "%s\n", plain_line(board_.snapshot()).c_str());
        }
        lock.lock();
    }
}

void LiveView::stop() {
    if (stopping_.exchange(true)) {
        if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
        return;
    }
    wake_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    if (screen_) {
        close_and_flush();
    } else if (!options_.quiet) {
        sample_gpus();
        std::fprintf(stderr, "%s\n", plain_line(board_.snapshot()).c_str());
    }
}

}  // namespace aff::ui
