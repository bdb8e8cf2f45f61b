// A 5 x 7 bitmap font for the PNG curve (hit_rate_png.cpp), which has no font library to
// draw text with: capitals, digits and the punctuation of titles, ticks and file names.
// Lower-case letters are drawn as capitals; anything else as a hollow box.
#pragma once

#include <array>
#include <cstdint>

namespace aff::trace {

constexpr int kGlyphWidth = 5, kGlyphHeight = 7, kGlyphAdvance = 6;

// Row r of the glyph for `c`: bit 4 is the leftmost column.
std::array<std::uint8_t, kGlyphHeight> glyph(char c);

}  // namespace aff::trace
