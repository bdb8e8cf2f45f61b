// The cell grid (see frame.hpp).
#include "libaff/ui/frame.hpp"

namespace aff::ui {

Frame::Frame(int rows, int cols)
    : rows_(rows < 0 ? 0 : rows), cols_(cols < 0 ? 0 : cols), cells_(std::size_t(rows_) * std::size_t(cols_)) {}

void Frame::put(int row, int col, char32_t ch, Style style) {
    if (row < 0 || row >= rows_ || col < 0 || col >= cols_) return;
    cells_[std::size_t(row) * cols_ + col] = Cell{ch, style};
}

int Frame::put(int row, int col, std::string_view text, Style style, int end) {
    if (end < 0 || end > cols_) end = cols_;
    std::size_t i = 0;
    while (i < text.size() && col < end) {
        const unsigned char b = static_cast<unsigned char>(text[i]);
        char32_t cp = b;
        std::size_t len = 1;
        if (b >= 0xF0) len = 4, cp = b & 0x07;
        else if (b >= 0xE0) len = 3, cp = b & 0x0F;
        else if (b >= 0xC0) len = 2, cp = b & 0x1F;
        else if (b >= 0x80) len = 1, cp = U'?';  // a stray continuation byte
        if (len > 1) {
            if (i + len > text.size()) { cp = U'?'; len = text.size() - i; }
            else for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        }
        if (cp < 0x20 || cp == 0x7F) cp = U'?';
        put(row, col++, cp, style);
        i += len;
    }
    return col;
}

void Frame::paint(int row, int col, int end, Style style) {
    if (row < 0 || row >= rows_) return;
    for (int c = col < 0 ? 0 : col; c < end && c < cols_; ++c) cells_[std::size_t(row) * cols_ + c].style = style;
}

std::string utf8(char32_t ch) {
    std::string s;
    if (ch < 0x80) {
        s += char(ch);
    } else if (ch < 0x800) {
        s += char(0xC0 | (ch >> 6));
        s += char(0x80 | (ch & 0x3F));
    } else if (ch < 0x10000) {
        s += char(0xE0 | (ch >> 12));
        s += char(0x80 | ((ch >> 6) & 0x3F));
        s += char(0x80 | (ch & 0x3F));
    } else {
        s += char(0xF0 | (ch >> 18));
        s += char(0x80 | ((ch >> 12) & 0x3F));
        s += char(0x80 | ((ch >> 6) & 0x3F));
        s += char(0x80 | (ch & 0x3F));
    }
    return s;
}

std::string Frame::row_text(int row) const {
    std::string s;
    int last = cols_ - 1;
    while (last >= 0 && at(row, last).ch == U' ') --last;
    for (int c = 0; c <= last; ++c) s += utf8(at(row, c).ch);
    return s;
}

std::string Frame::text() const {
    std::string s;
    for (int r = 0; r < rows_; ++r) s += row_text(r) + "\n";
    return s;
}

}  // namespace aff::ui
