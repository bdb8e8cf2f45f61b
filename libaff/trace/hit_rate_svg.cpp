// The hit-rate-vs-VRAM curve of replay.hpp as a standalone SVG: axes in MiB and percent,
// one polyline and legend entry per policy, points at each replayed capacity.
#include "libaff/trace/replay.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
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

}  // namespace

std::string hit_rate_svg(const std::vector<ReplayResult>& rs, const std::string& title) {
    const double W = 720, H = 440, L = 70, R = 150, T = 40, B = 60;
    double max_mib = 1;
    for (const ReplayResult& r : rs) max_mib = std::max(max_mib, double(r.gpu_bytes) / (1 << 20));
    auto x = [&](double mib) { return L + (W - L - R) * mib / max_mib; };
    auto y = [&](double rate) { return H - B - (H - T - B) * rate; };
    std::map<std::string, std::vector<std::pair<double, double>>> lines;
    std::vector<std::string> order;
    for (const ReplayResult& r : rs) {
        if (!lines.count(r.policy)) order.push_back(r.policy);
        lines[r.policy].push_back({double(r.gpu_bytes) / (1 << 20), r.gpu_hit_rate()});
    }
    static const char* colours[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#111111", "#8c564b"};
    std::ostringstream s;
    char buf[256];
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    s << "<text x=\"" << L << "\" y=\"24\" font-size=\"14\">" << escape(title) << "</text>\n";
    for (int i = 0; i <= 10; ++i) {
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n",
                      L, y(i / 10.0), W - R, y(i / 10.0), L - 6, y(i / 10.0) + 4, i * 10);
        s << buf;
    }
    for (int i = 0; i <= 5; ++i) {
        const double mib = max_mib * i / 5;
        std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x(mib), H - B + 18, mib);
        s << buf;
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">GPU expert memory (MiB)</text>\n"
                  "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" text-anchor=\"middle\">GPU hit rate</text>\n",
                  (L + W - R) / 2, H - 20, (T + H - B) / 2, (T + H - B) / 2);
    s << buf;
    s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
      << "\" fill=\"none\" stroke=\"#333\"/>\n";
    for (std::size_t p = 0; p < order.size(); ++p) {
        const char* c = colours[p % 7];
        auto pts = lines[order[p]];
        std::sort(pts.begin(), pts.end());
        s << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\" points=\"";
        for (auto [m, r] : pts) {
            std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(m), y(r));
            s << buf;
        }
        s << "\"/>\n";
        for (auto [m, r] : pts) {
            std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %.0f MiB: %.2f%%</title></circle>\n",
                          x(m), y(r), c, escape(order[p]).c_str(), m, 100 * r);
            s << buf;
        }
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                      W - R + 14, T + 10 + 20.0 * p, W - R + 34, T + 10 + 20.0 * p, c, W - R + 40, T + 14 + 20.0 * p,
                      escape(order[p]).c_str());
        s << buf;
    }
    s << "</svg>\n";
    return s.str();
}

}  // namespace aff::trace
