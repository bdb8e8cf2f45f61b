// Figures as text (see figures_text.hpp).
#include "libaff/ui/figures_text.hpp"

#include "libaff/core/units.hpp"
#include "libaff/ui/frame.hpp"

#include <algorithm>
#include <cstdio>

namespace aff::ui {

std::string fixed(double value, int decimals) {
    if (value < 0) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    return buf;
}

std::string bytes_per_second(double value) { return value < 0 ? "-" : format_rate(value); }

std::string memory_pair(double used_bytes, double total_bytes) {
    if (used_bytes < 0 || total_bytes < 0) return "-";
    const double gib = 1024.0 * 1024.0 * 1024.0;
    return fixed(used_bytes / gib, 1) + "/" + fixed(total_bytes / gib, 1) + " GiB";
}

std::string sparkline(const std::vector<double>& values, int width, bool unicode) {
    static const char32_t blocks[] = {U'▁', U'▂', U'▃', U'▄', U'▅', U'▆', U'▇', U'█'};
    static const char ascii[] = "_.-=+*#@";
    if (width <= 0) return {};
    const std::size_t n = std::min(values.size(), std::size_t(width));
    const auto first = values.end() - std::ptrdiff_t(n);
    double top = 0;
    for (auto it = first; it != values.end(); ++it) top = std::max(top, *it);
    std::string s(std::size_t(width) - n, ' ');
    for (auto it = first; it != values.end(); ++it) {
        if (*it <= 0 || top <= 0) {
            s += ' ';
            continue;
        }
        const int level = std::clamp(int(*it / top * 8.0 - 1e-9), 0, 7);
        if (unicode) s += utf8(blocks[level]);
        else s += ascii[level];
    }
    return s;
}

std::string plain_line(const Snapshot& s) {
    const ThroughputFigures& t = s.throughput;
    std::string l = s.tool + ": stats";
    auto field = [&](const std::string& key, const std::string& value) { l += " " + key + "=" + value; };
    // A figure not reported prints as "-", without its unit.
    auto unit = [](double v, int decimals, const char* u) { return v < 0 ? std::string("-") : fixed(v, decimals) + u; };
    field("t", unit(s.elapsed_s, 1, "s"));
    field("prefill", unit(t.prefill_tok_s, 1, "tok/s"));
    field("decode", unit(t.decode_tok_s, 1, "tok/s"));
    field("decode_1m", unit(t.decode_mean_tok_s, 1, "tok/s"));
    field("ttft", unit(t.ttft_ms, 0, "ms"));
    field("prompt", std::to_string(t.prompt_tokens));
    field("cached", std::to_string(t.cached_tokens));
    field("generated", std::to_string(t.generated_tokens));
    field("queued", std::to_string(s.queued));
    field("running", std::to_string(s.running));
    field("done", std::to_string(s.done));
    if (!s.drafts || (s.drafts->drafting && s.drafts->verify_calls == 0)) {
        field("drafts", "none-yet");
    } else if (!s.drafts->drafting) {
        field("drafts", "off");
    } else {
        field("verify_calls", std::to_string(s.drafts->verify_calls));
        field("accept", fixed(s.drafts->acceptance_rate, 3));
        field("accepted_len", fixed(s.drafts->mean_accepted_length, 2));
    }
    if (!s.tiers) {
        field("tiers", "none-yet");
    } else if (!s.tiers->tiered) {
        field("tiers", "all-resident-" + s.tiers->resident);
    } else {
        const TierFigures& t = *s.tiers;
        field("tier_GPU", std::to_string(t.on_gpu));
        field("tier_host", std::to_string(t.in_host));
        if (t.has_ssd_tier) field("tier_SSD", std::to_string(t.on_ssd));
        for (const TierHitRate& h : t.hit_rates) field("hit_" + h.tier, fixed(h.hit_rate, 3));
        field("pcie", unit(t.pcie_bytes_s / 1e9, 2, "GB/s"));
        field("ssd", t.has_ssd_tier ? unit(t.ssd_bytes_s / 1e9, 2, "GB/s") : std::string("no-tier"));
        field("moves_per_tok", fixed(t.moves_per_token, 2));
        field("cpu_share", fixed(t.cpu_expert_share, 3));
    }
    if (s.gpus) {
        for (std::size_t i = 0; i < s.gpus->size(); ++i) {
            const GpuFigures& g = (*s.gpus)[i];
            const std::string k = "gpu" + std::to_string(i) + "_";
            const double gib = 1024.0 * 1024.0 * 1024.0;
            field(k + "util", unit(g.utilisation_pct, 0, "%"));
            field(k + "mem", g.memory_used_bytes < 0 || g.memory_total_bytes < 0
                                 ? std::string("-")
                                 : fixed(g.memory_used_bytes / gib, 1) + "/" + unit(g.memory_total_bytes / gib, 1, "GiB"));
            field(k + "power", unit(g.power_w, 0, "W"));
            field(k + "sm", unit(g.sm_clock_mhz, 0, "MHz"));
        }
    }
    return l;
}

}  // namespace aff::ui
