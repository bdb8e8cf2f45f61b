// The layout of the hit-rate-vs-VRAM curve (replay.hpp), computed once and drawn by two
// renderers: hit_rate_svg.cpp (always) and hit_rate_png.cpp (where libpng was found at
// configure time). Coordinates are pixels of a width x height canvas, y downwards.
#pragma once

#include "libaff/trace/replay.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace aff::trace {

struct ChartPoint {
    double x = 0, y = 0;
};

struct ChartLine {
    ChartPoint a, b;
};

struct ChartText {
    enum class Anchor : std::uint8_t { start, middle, end };
    ChartPoint at;  // the baseline point the anchor refers to
    std::string text;
    Anchor anchor = Anchor::start;
    bool vertical = false;  // turned a quarter to the left, reading upwards
    double size = 12;
};

struct ChartSeries {
    std::string name;
    std::uint32_t rgb = 0;  // 0xRRGGBB
    std::vector<ChartPoint> points;  // by capacity
    std::vector<std::string> tips;   // one per point: "policy MiB: rate"
    ChartLine legend;                // the legend's sample stroke
    ChartText label;                 // the legend's name
};

struct HitRateChart {
    double width = 720, height = 440;
    ChartPoint plot_min, plot_max;  // the plot frame's corners
    std::vector<ChartLine> grid;    // a light line every 10 %
    std::vector<ChartText> texts;   // title, tick labels, axis names
    std::vector<ChartSeries> series;
};

HitRateChart hit_rate_chart(const std::vector<ReplayResult>& results, const std::string& title);

}  // namespace aff::trace
