// Rendering of progress lines (see progress_reporter.hpp for the rules).
#include "libaff/ui/progress_reporter.hpp"

#include "libaff/core/printable.hpp"
#include "libaff/core/units.hpp"

#include <unistd.h>

namespace aff::ui {
namespace {
constexpr auto kFirstDrawDelay = std::chrono::seconds(1);
constexpr auto kRedrawInterval = std::chrono::milliseconds(200);
}  // namespace

ProgressReporter::ProgressReporter(std::FILE* stream, bool terminal, ProgressMode mode, bool quiet)
    : stream_(stream), quiet_(quiet) {
    const bool on = !quiet && mode != ProgressMode::never;
    live_ = on && terminal;
    plain_ = on && !terminal;
}

ProgressReporter::~ProgressReporter() {
    if (drawn_) std::fputs("\n", stream_);
}

std::string ProgressReporter::quantity(double v) const {
    if (unit_ == "B") return format_bytes(static_cast<std::uint64_t>(v));
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit_.c_str());
    return buf;
}

void ProgressReporter::begin(const std::string& stage, std::uint64_t total, const std::string& unit) {
    stage_ = printable(stage);
    unit_ = unit;
    total_ = total;
    done_ = 0;
    last_decile_ = -1;
    start_ = last_draw_ = std::chrono::steady_clock::now();
    if (plain_) std::fprintf(stream_, "%s: started (%s)\n", stage_.c_str(), quantity(static_cast<double>(total_)).c_str());
}

void ProgressReporter::advance(std::uint64_t delta) {
    done_ += delta;
    const auto now = std::chrono::steady_clock::now();
    if (live_) {
        if (now - start_ >= kFirstDrawDelay && now - last_draw_ >= kRedrawInterval) {
            last_draw_ = now;
            draw(false);
        }
    } else if (plain_ && total_ > 0) {
        int decile = static_cast<int>(done_ * 10 / total_);
        if (decile > last_decile_ && decile < 10) {
            last_decile_ = decile;
            std::fprintf(stream_, "%s: %d%%\n", stage_.c_str(), decile * 10);
        }
    }
}

void ProgressReporter::draw(bool final_line) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done_) / secs : 0;
    std::string line = "\r" + stage_ + ": " + quantity(static_cast<double>(done_));
    if (total_ > 0) {
        char pct[16];
        std::snprintf(pct, sizeof pct, " %5.1f%%", 100.0 * static_cast<double>(done_) / static_cast<double>(total_));
        line += " / " + quantity(static_cast<double>(total_)) + pct;
    }
    line += unit_ == "B" ? "  " + format_rate(rate) : "";
    if (total_ > 0 && rate > 0 && !final_line)
        line += "  ETA " + format_duration(static_cast<double>(total_ - std::min(done_, total_)) / rate);
    line += "\x1b[K";
    std::fputs(line.c_str(), stream_);
    std::fflush(stream_);
    drawn_ = true;
}

void ProgressReporter::end() {
    if (live_ && drawn_) {
        draw(true);
        std::fputs("\n", stream_);
        drawn_ = false;
    } else if (plain_) {
        std::fprintf(stream_, "%s: done\n", stage_.c_str());
    }
}

void ProgressReporter::note(const std::string& line) {
    if (quiet_) return;
    if (drawn_) std::fputs("\r\x1b[K", stream_);
    std::fprintf(stream_, "%s\n", printable(line).c_str());
    if (drawn_) draw(false);
}

std::unique_ptr<Progress> make_progress(ProgressMode mode, bool quiet) {
    return std::make_unique<ProgressReporter>(stderr, ::isatty(STDERR_FILENO) == 1, mode, quiet);
}

}  // namespace aff::ui
