// The curve's layout (hit_rate_chart.hpp): axes in MiB and percent, one series and legend
// entry per policy in the order the results name them, points at each replayed capacity.
#include "libaff/trace/hit_rate_chart.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace aff::trace {

HitRateChart hit_rate_chart(const std::vector<ReplayResult>& rs, const std::string& title) {
    HitRateChart c;
    const double W = c.width, H = c.height, L = 70, R = 150, T = 40, B = 60;
    c.plot_min = {L, T};
    c.plot_max = {W - R, H - B};
    double max_mib = 1;
    for (const ReplayResult& r : rs) max_mib = std::max(max_mib, double(r.gpu_bytes) / (1 << 20));
    auto x = [&](double mib) { return L + (W - L - R) * mib / max_mib; };
    auto y = [&](double rate) { return H - B - (H - T - B) * rate; };
    using Anchor = ChartText::Anchor;
    c.texts.push_back({{L, 24}, title, Anchor::start, false, 14});
    char buf[64];
    for (int i = 0; i <= 10; ++i) {
        c.grid.push_back({{L, y(i / 10.0)}, {W - R, y(i / 10.0)}});
        std::snprintf(buf, sizeof buf, "%d%%", i * 10);
        c.texts.push_back({{L - 6, y(i / 10.0) + 4}, buf, Anchor::end});
    }
    for (int i = 0; i <= 5; ++i) {
        const double mib = max_mib * i / 5;
        std::snprintf(buf, sizeof buf, "%.0f", mib);
        c.texts.push_back({{x(mib), H - B + 18}, buf, Anchor::middle});
    }
    c.texts.push_back({{(L + W - R) / 2, H - 20}, "GPU expert memory (MiB)", Anchor::middle});
    c.texts.push_back({{16, (T + H - B) / 2}, "GPU hit rate", Anchor::middle, true});

    std::map<std::string, std::vector<std::pair<double, double>>> lines;
    std::vector<std::string> order;
    for (const ReplayResult& r : rs) {
        if (!lines.count(r.policy)) order.push_back(r.policy);
        lines[r.policy].push_back({double(r.gpu_bytes) / (1 << 20), r.gpu_hit_rate()});
    }
    static const std::uint32_t colours[] = {0xd62728, 0x1f77b4, 0x2ca02c, 0xff7f0e, 0x9467bd, 0x111111, 0x8c564b};
    for (std::size_t p = 0; p < order.size(); ++p) {
        ChartSeries s;
        s.name = order[p];
        s.rgb = colours[p % 7];
        auto pts = lines[order[p]];
        std::sort(pts.begin(), pts.end());
        for (auto [m, r] : pts) {
            s.points.push_back({x(m), y(r)});
            std::snprintf(buf, sizeof buf, " %.0f MiB: %.2f%%", m, 100 * r);
            s.tips.push_back(s.name + buf);
        }
        const double row = T + 10 + 20.0 * double(p);
        s.legend = {{W - R + 14, row}, {W - R + 34, row}};
        s.label = {{W - R + 40, row + 4}, s.name};
        c.series.push_back(std::move(s));
    }
    return c;
}

}  // namespace aff::trace
