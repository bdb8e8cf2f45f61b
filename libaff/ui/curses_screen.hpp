// The terminal side of the dashboard, and the only file that includes ncurses (whose
// macros would clash with other code): starts the screen on standard error's terminal,
// copies a Frame to it, reads keys with a timeout, and restores the terminal. Keys come
// in raw mode, so Ctrl-C arrives as a key and the view ends through the same clean path
// as q. A signal that still ends the process (SIGTERM, an outside SIGINT) restores the
// terminal through aff::cli's handler with async-signal-safe calls only (see restore()).
#pragma once

#include "libaff/ui/frame.hpp"

#include <memory>

namespace aff::ui {

class CursesScreen {
public:
    enum class Key { none, quit, resize, other };

    // Throws aff::Error (usage) naming why when standard error is not a terminal or the
    // terminal cannot be driven (TERM unknown).
    static std::unique_ptr<CursesScreen> open();
    ~CursesScreen();
    CursesScreen(const CursesScreen&) = delete;
    CursesScreen& operator=(const CursesScreen&) = delete;

    int rows() const;
    int cols() const;
    bool unicode() const { return unicode_; }
    void draw(const Frame& frame);
    // Waits up to timeout_ms for a key: q, Q or Ctrl-C are quit; a resize is reported as one.
    Key wait_key(int timeout_ms);
    // Restores the terminal (idempotent).
    void close();

private:
    CursesScreen() = default;
    bool unicode_ = false;
    bool open_ = false;
    void* screen_ = nullptr;  // SCREEN*
    void* tty_ = nullptr;     // FILE* of /dev/tty when stdin is not the terminal
};

// True when standard error is a terminal the dashboard could use.
bool stderr_is_terminal();

}  // namespace aff::ui
