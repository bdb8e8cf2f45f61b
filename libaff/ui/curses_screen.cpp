// ncurses behind CursesScreen (see curses_screen.hpp).
#include "libaff/ui/curses_screen.hpp"

#include "libaff/core/error.hpp"
#include "libaff/ui/cli.hpp"

#include <algorithm>
#include <atomic>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <langinfo.h>
#include <termios.h>
#include <unistd.h>

#define NCURSES_WIDECHAR 1
#include <curses.h>

namespace aff::ui {
namespace {

// What the signal-time restore needs, captured while the screen starts: the terminal's
// modes before curses changed them and terminfo's strings that undo curses' setup.
struct SavedTerminal {
    int fd = -1;
    termios modes{};
    char undo[256] = {};  // rmcup, rmkx, cnorm, sgr0 as terminfo gives them
    std::size_t undo_len = 0;
};
SavedTerminal g_saved;
std::atomic<bool> g_screen_active{false};

extern "C" void restore_terminal_from_signal() {
    if (!g_screen_active.exchange(false)) return;
    if (g_saved.undo_len) (void)!::write(g_saved.fd, g_saved.undo, g_saved.undo_len);
    ::tcsetattr(g_saved.fd, TCSANOW, &g_saved.modes);
}

void save_undo_strings() {
    g_saved.undo_len = 0;
    for (const char* cap : {"rmcup", "rmkx", "cnorm", "sgr0"}) {
        const char* s = ::tigetstr(const_cast<char*>(cap));
        if (!s || s == reinterpret_cast<char*>(-1)) continue;
        const std::size_t n = std::strlen(s);
        if (g_saved.undo_len + n > sizeof g_saved.undo) break;
        std::memcpy(g_saved.undo + g_saved.undo_len, s, n);
        g_saved.undo_len += n;
    }
}

short pair_of(Colour c) {
    switch (c) {
        case Colour::green: return 1;
        case Colour::yellow: return 2;
        case Colour::red: return 3;
        case Colour::cyan: return 4;
        case Colour::magenta: return 5;
        case Colour::blue: return 6;
        case Colour::normal: break;
    }
    return 0;
}

attr_t attributes_of(const Style& s) {
    attr_t a = A_NORMAL;
    if (s.weight == Weight::bold) a |= A_BOLD;
    if (s.weight == Weight::dim) a |= A_DIM;
    if (s.reverse) a |= A_REVERSE;
    return a;
}

}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

std::unique_ptr<CursesScreen> CursesScreen::open() {
    if (!stderr_is_terminal()) throw_usage("--ui dash: standard error is not a terminal (use --ui plain or auto)");
    const char* term = std::getenv("TERM");
    if (!term || !*term || std::strcmp(term, "dumb") == 0)
        throw_usage(std::string("--ui dash: the terminal type (TERM=") + (term ? term : "") + ") cannot draw the view");
    std::setlocale(LC_CTYPE, "");
    std::unique_ptr<CursesScreen> s(new CursesScreen());
    s->unicode_ = std::strcmp(::nl_langinfo(CODESET), "UTF-8") == 0;
    g_saved.fd = STDERR_FILENO;
    ::tcgetattr(g_saved.fd, &g_saved.modes);
    // Output to standard error (stdout carries data); keys from the terminal (stdin when it
    // is one, else the controlling terminal).
    std::FILE* keys = stdin;
    if (::isatty(STDIN_FILENO) != 1) {
        s->tty_ = std::fopen("/dev/tty", "r");
        if (s->tty_) keys = static_cast<std::FILE*>(s->tty_);
    }
    SCREEN* screen = ::newterm(term, stderr, keys);
    if (!screen) throw_usage(std::string("--ui dash: cannot start the terminal view (TERM=") + term + ")");
    s->screen_ = screen;
    s->open_ = true;
    ::set_term(screen);
    save_undo_strings();
    g_screen_active = true;
    cli::set_terminal_restore(restore_terminal_from_signal);
    ::raw();
    ::noecho();
    ::keypad(stdscr, TRUE);
    ::curs_set(0);
    if (::has_colors()) {
        ::start_color();
        ::use_default_colors();
        ::init_pair(1, COLOR_GREEN, -1);
        ::init_pair(2, COLOR_YELLOW, -1);
        ::init_pair(3, COLOR_RED, -1);
        ::init_pair(4, COLOR_CYAN, -1);
        ::init_pair(5, COLOR_MAGENTA, -1);
        ::init_pair(6, COLOR_BLUE, -1);
    }
    return s;
}

CursesScreen::~CursesScreen() { close(); }

void CursesScreen::close() {
    if (!open_) return;
    open_ = false;
    g_screen_active = false;
    cli::set_terminal_restore(nullptr);
    ::endwin();
    ::delscreen(static_cast<SCREEN*>(screen_));
    screen_ = nullptr;
    if (tty_) std::fclose(static_cast<std::FILE*>(tty_));
    tty_ = nullptr;
    std::fflush(stderr);
}

int CursesScreen::rows() const { return getmaxy(stdscr); }
int CursesScreen::cols() const { return getmaxx(stdscr); }

void CursesScreen::draw(const Frame& frame) {
    ::werase(stdscr);
    const int rows = std::min(frame.rows(), this->rows()), cols = std::min(frame.cols(), this->cols());
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            const Cell& cell = frame.at(r, c);
            const attr_t a = attributes_of(cell.style);
            const short p = pair_of(cell.style.colour);
            if (unicode_) {
                wchar_t text[2] = {static_cast<wchar_t>(cell.ch), 0};
                cchar_t cc;
                ::setcchar(&cc, text, a, p, nullptr);
                mvwadd_wch(stdscr, r, c, &cc);
            } else {
                const chtype ch = cell.ch < 0x80 ? chtype(cell.ch) : chtype('?');
                mvwaddch(stdscr, r, c, ch | a | COLOR_PAIR(p));
            }
        }
    }
    ::wrefresh(stdscr);
}

CursesScreen::Key CursesScreen::wait_key(int timeout_ms) {
    ::wtimeout(stdscr, timeout_ms);
    const int ch = ::wgetch(stdscr);
    if (ch == ERR) return Key::none;
    if (ch == 'q' || ch == 'Q' || ch == 3) return Key::quit;
    if (ch == KEY_RESIZE) return Key::resize;
    return Key::other;
}

}  // namespace aff::ui
