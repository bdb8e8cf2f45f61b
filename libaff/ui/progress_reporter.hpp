// Shows libaff's Progress on stderr: on a terminal one line redrawn at most 5 times a
// second with rate and ETA, appearing only after the first second; when piped, one
// plain line per stage and per 10 %. (style.md §6: zstd's rate, git's delay.)
#pragma once

#include "libaff/core/progress.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

namespace aff::ui {

enum class ProgressMode { auto_detect, always, never };

class ProgressReporter final : public Progress {
public:
    // quiet suppresses notes too; `terminal` says whether the stream is a terminal.
    ProgressReporter(std::FILE* stream, bool terminal, ProgressMode mode, bool quiet);
    ~ProgressReporter() override;

    void begin(const std::string& stage, std::uint64_t total, const std::string& unit) override;
    void advance(std::uint64_t done_delta) override;
    void end() override;
    void note(const std::string& line) override;

private:
    void draw(bool final_line);
    std::string quantity(double v) const;

    std::FILE* stream_;
    bool live_;     // redrawn line on a terminal
    bool plain_;    // plain lines when not a terminal
    bool quiet_;
    std::string stage_, unit_;
    std::uint64_t total_ = 0, done_ = 0;
    int last_decile_ = -1;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_, last_draw_;
};

std::unique_ptr<Progress> make_progress(ProgressMode mode, bool quiet);

}  // namespace aff::ui
