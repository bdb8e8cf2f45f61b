// The hit-rate-vs-VRAM curve as a PNG, for viewers that do not open SVG: the layout of
// hit_rate_chart.hpp rasterised into an RGB canvas (strokes stamped as discs, text in the
// bitmap font of chart_font.hpp) and encoded with libpng, which is optional at configure
// time (AFF_HAVE_PNG); without it hit_rate_png_available() is false and nothing is drawn.
#include "libaff/trace/replay.hpp"

#include "libaff/core/error.hpp"
#include "libaff/trace/chart_font.hpp"
#include "libaff/trace/hit_rate_chart.hpp"

#include <algorithm>
#include <cmath>

#ifdef AFF_HAVE_PNG
#include <csetjmp>
#include <png.h>
#endif

namespace aff::trace {

std::string png_beside(const std::string& svg) {
    const std::string ext = ".svg";
    if (svg.size() > ext.size() && svg.compare(svg.size() - ext.size(), ext.size(), ext) == 0)
        return svg.substr(0, svg.size() - ext.size()) + ".png";
    return svg + ".png";
}

#ifdef AFF_HAVE_PNG

namespace {

class Canvas {
public:
    Canvas(int w, int h) : w_(w), h_(h), rgb_(std::size_t(w) * h * 3, 0xff) {}
    int width() const { return w_; }
    int height() const { return h_; }
    const std::uint8_t* row(int y) const { return &rgb_[std::size_t(y) * w_ * 3]; }

    void pixel(int x, int y, std::uint32_t c) {
        if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
        std::uint8_t* p = &rgb_[(std::size_t(y) * w_ + x) * 3];
        p[0] = std::uint8_t(c >> 16), p[1] = std::uint8_t(c >> 8), p[2] = std::uint8_t(c);
    }
    void disc(ChartPoint at, double r, std::uint32_t c) {
        for (int y = int(std::floor(at.y - r)); y <= int(std::ceil(at.y + r)); ++y)
            for (int x = int(std::floor(at.x - r)); x <= int(std::ceil(at.x + r)); ++x)
                if ((x - at.x) * (x - at.x) + (y - at.y) * (y - at.y) <= r * r) pixel(x, y, c);
    }
    // A stroke of `width` pixels: a disc every half pixel along it (one pixel for width 1).
    void line(const ChartLine& l, double width, std::uint32_t c) {
        const double len = std::hypot(l.b.x - l.a.x, l.b.y - l.a.y);
        const int steps = std::max(1, int(std::ceil(len * 2)));
        for (int i = 0; i <= steps; ++i) {
            const ChartPoint p{l.a.x + (l.b.x - l.a.x) * i / steps, l.a.y + (l.b.y - l.a.y) * i / steps};
            if (width <= 1) pixel(int(std::lround(p.x)), int(std::lround(p.y)), c);
            else disc(p, width / 2, c);
        }
    }
    void text(const ChartText& t, std::uint32_t c) {
        const int scale = t.size >= 14 ? 2 : 1;
        const double w = double(t.text.size() * kGlyphAdvance * scale - scale);
        const double u0 = t.anchor == ChartText::Anchor::start ? 0 : t.anchor == ChartText::Anchor::middle ? -w / 2 : -w;
        for (std::size_t i = 0; i < t.text.size(); ++i) {
            const auto g = glyph(t.text[i]);
            for (int r = 0; r < kGlyphHeight * scale; ++r)
                for (int col = 0; col < kGlyphWidth * scale; ++col) {
                    if (!((g[r / scale] >> (kGlyphWidth - 1 - col / scale)) & 1)) continue;
                    // (u, v): along the text from the anchor, and down from the baseline.
                    const double u = u0 + double(i * kGlyphAdvance * scale + col), v = double(r - kGlyphHeight * scale + 1);
                    if (t.vertical) pixel(int(std::lround(t.at.x + v)), int(std::lround(t.at.y - u)), c);
                    else pixel(int(std::lround(t.at.x + u)), int(std::lround(t.at.y + v)), c);
                }
        }
    }

private:
    int w_, h_;
    std::vector<std::uint8_t> rgb_;
};

void append(png_structp png, png_bytep data, png_size_t n) {
    auto* out = static_cast<std::vector<std::uint8_t>*>(png_get_io_ptr(png));
    out->insert(out->end(), data, data + n);
}

// libpng reports errors by longjmp: nothing with a destructor lives in this frame.
bool encode(const Canvas& canvas, const std::vector<png_bytep>& rows, std::vector<std::uint8_t>* out) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    if (!png) return false;
    png_infop info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return false;
    }
    png_set_write_fn(png, out, append, nullptr);
    png_set_IHDR(png, info, png_uint_32(canvas.width()), png_uint_32(canvas.height()), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_filter(png, 0, PNG_FILTER_NONE);  // rows as drawn: small, and simple to check
    png_write_info(png, info);
    png_write_image(png, const_cast<png_bytepp>(rows.data()));
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    return true;
}

}  // namespace

bool hit_rate_png_available() { return true; }

std::vector<std::uint8_t> hit_rate_png(const std::vector<ReplayResult>& rs, const std::string& title) {
    const HitRateChart c = hit_rate_chart(rs, title);
    Canvas canvas(int(c.width), int(c.height));
    for (const ChartLine& g : c.grid) canvas.line(g, 1, 0xdddddd);
    const ChartPoint a = c.plot_min, b = c.plot_max;
    for (const ChartLine& edge : {ChartLine{a, {b.x, a.y}}, ChartLine{{b.x, a.y}, b}, ChartLine{b, {a.x, b.y}}, ChartLine{{a.x, b.y}, a}})
        canvas.line(edge, 1, 0x333333);
    for (const ChartText& t : c.texts) canvas.text(t, 0x000000);
    for (const ChartSeries& s : c.series) {
        for (std::size_t i = 1; i < s.points.size(); ++i) canvas.line({s.points[i - 1], s.points[i]}, 2, s.rgb);
        for (const ChartPoint& p : s.points) canvas.disc(p, 3, s.rgb);
        canvas.line(s.legend, 2, s.rgb);
        canvas.text(s.label, 0x000000);
    }
    std::vector<png_bytep> rows(std::size_t(canvas.height()));
    for (int y = 0; y < canvas.height(); ++y) rows[std::size_t(y)] = const_cast<png_bytep>(canvas.row(y));
    std::vector<std::uint8_t> out;
    if (!encode(canvas, rows, &out)) throw_internal("libpng could not encode the hit-rate curve");
    return out;
}

#else

bool hit_rate_png_available() { return false; }

std::vector<std::uint8_t> hit_rate_png(const std::vector<ReplayResult>&, const std::string&) {
    throw_usage("this build has no PNG support (libpng was not found at configure time)");
}

#endif

}  // namespace aff::trace
