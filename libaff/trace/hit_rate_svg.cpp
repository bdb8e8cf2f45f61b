// The hit-rate-vs-VRAM curve of replay.hpp as a standalone SVG, drawn from the layout of
// hit_rate_chart.hpp.
#include "libaff/trace/hit_rate_chart.hpp"

#include <cstdio>
#include <sstream>

namespace aff::trace {

namespace {

std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else o += c;
    }
    return o;
}

std::string colour(std::uint32_t rgb) {
    char b[8];
    std::snprintf(b, sizeof b, "#%06x", unsigned(rgb & 0xffffff));
    return b;
}

void text(std::ostringstream& s, const ChartText& t) {
    static const char* anchors[] = {"start", "middle", "end"};
    char buf[200];
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\"", t.at.x, t.at.y);
    s << buf;
    if (t.anchor != ChartText::Anchor::start) s << " text-anchor=\"" << anchors[int(t.anchor)] << "\"";
    if (t.size != 12) s << " font-size=\"" << t.size << "\"";
    if (t.vertical) {
        std::snprintf(buf, sizeof buf, " transform=\"rotate(-90 %.1f %.1f)\"", t.at.x, t.at.y);
        s << buf;
    }
    s << ">" << escape(t.text) << "</text>\n";
}

}  // namespace

std::string hit_rate_svg(const std::vector<ReplayResult>& rs, const std::string& title) {
    const HitRateChart c = hit_rate_chart(rs, title);
    std::ostringstream s;
    char buf[256];
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << c.width << "\" height=\"" << c.height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    for (const ChartLine& g : c.grid) {
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", g.a.x, g.a.y, g.b.x,
                      g.b.y);
        s << buf;
    }
    for (const ChartText& t : c.texts) text(s, t);
    s << "<rect x=\"" << c.plot_min.x << "\" y=\"" << c.plot_min.y << "\" width=\"" << c.plot_max.x - c.plot_min.x << "\" height=\""
      << c.plot_max.y - c.plot_min.y << "\" fill=\"none\" stroke=\"#333\"/>\n";
    for (const ChartSeries& series : c.series) {
        const std::string col = colour(series.rgb);
        s << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"";
        for (const ChartPoint& p : series.points) {
            std::snprintf(buf, sizeof buf, "%.1f,%.1f ", p.x, p.y);
            s << buf;
        }
        s << "\"/>\n";
        for (std::size_t i = 0; i < series.points.size(); ++i) {
            std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", series.points[i].x,
                          series.points[i].y, col.c_str());
            s << buf << escape(series.tips[i]) << "</title></circle>\n";
        }
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                      series.legend.a.x, series.legend.a.y, series.legend.b.x, series.legend.b.y, col.c_str());
        s << buf;
        text(s, series.label);
    }
    s << "</svg>\n";
    return s.str();
}

}  // namespace aff::trace
