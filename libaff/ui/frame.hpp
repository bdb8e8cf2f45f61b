// A screen as a grid of styled cells, drawn without a terminal: the dashboard's layout
// (dash_layout.hpp) writes a Frame from a Snapshot, the curses view (live_view.cpp) copies
// it to the terminal, and the unit tests read it as text. Keeping the drawing pure keeps
// it testable and keeps ncurses in one file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aff::ui {

enum class Colour : std::uint8_t { normal, green, yellow, red, cyan, magenta, blue };
enum class Weight : std::uint8_t { dim, normal, bold };

struct Style {
    Colour colour = Colour::normal;
    Weight weight = Weight::normal;
    bool reverse = false;
    bool operator==(const Style&) const = default;
};

struct Cell {
    char32_t ch = U' ';
    Style style;
};

class Frame {
public:
    Frame(int rows, int cols);
    int rows() const { return rows_; }
    int cols() const { return cols_; }
    const Cell& at(int row, int col) const { return cells_[std::size_t(row) * cols_ + col]; }

    // Writes UTF-8 text from (row, col), one cell per code point, clipped at column `end`
    // (-1: the frame's width); control characters become '?'. Returns the column after it.
    int put(int row, int col, std::string_view text, Style style = {}, int end = -1);
    void put(int row, int col, char32_t ch, Style style = {});
    // Paints a row's cells [col, end) with a style, leaving their characters.
    void paint(int row, int col, int end, Style style);

    // A row as UTF-8, trailing blanks dropped; the whole frame, one row per line.
    std::string row_text(int row) const;
    std::string text() const;

private:
    int rows_, cols_;
    std::vector<Cell> cells_;
};

// UTF-8 of one code point.
std::string utf8(char32_t ch);

}  // namespace aff::ui
