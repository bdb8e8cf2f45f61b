// The dashboard's layout (see dash_layout.hpp). Every panel writes inside its box and
// clips there, so no size of terminal or figure can spill into a neighbour.
#include "libaff/ui/dash_layout.hpp"

#include "libaff/ui/figures_text.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>

namespace aff::ui {
namespace {

const Style title_style{Colour::cyan, Weight::bold};
const Style rule_style{Colour::cyan, Weight::dim};
const Style label_style{Colour::normal, Weight::dim};
const Style value_style{Colour::normal, Weight::bold};
const Style placeholder_style{Colour::magenta, Weight::normal};
const Style header_style{Colour::normal, Weight::bold, true};
// Heat levels 0..4 (heat_level) as glyphs of rising density.
constexpr std::array<char32_t, 5> glyphs_u{U'·', U'░', U'▒', U'▓', U'█'};
constexpr std::array<char32_t, 5> glyphs_a{U'.', U':', U'+', U'*', U'#'};

struct Box {
    int row = 0, col = 0, rows = 0, cols = 0;
    int end() const { return col + cols; }
};

// "── Name ── note ─────" across the box's first row.
void title_row(Frame& f, const Box& b, int row, const std::string& name, bool unicode, const std::string& note = {},
               Style note_style = placeholder_style) {
    const char32_t rule = unicode ? U'─' : U'-';
    for (int c = b.col; c < b.end(); ++c) f.put(row, c, rule, rule_style);
    int c = f.put(row, b.col + 1, " " + name + " ", title_style, b.end());
    if (!note.empty()) f.put(row, c + 1, " " + note + " ", note_style, b.end());
}

// Label then value, returning the column after them.
int pair(Frame& f, int row, int col, int end, const std::string& label, const std::string& value,
         Style value_s = value_style) {
    col = f.put(row, col, label, label_style, end);
    return f.put(row, col, value, value_s, end);
}

std::string right(const std::string& s, int width) {
    return int(s.size()) >= width ? s : std::string(std::size_t(width) - s.size(), ' ') + s;
}

int draw_throughput(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    const ThroughputFigures& t = s.throughput;
    title_row(f, b, b.row, "Throughput", unicode);
    const int c0 = b.col + 1, e = b.end();
    int r = b.row + 1, last = b.row + b.rows;
    if (r < last) {
        int c = pair(f, r, c0, e, "prefill ", right(fixed(t.prefill_tok_s, 1), 8));
        c = f.put(r, c, " tok/s", label_style, e);
        pair(f, r, c, e, "  ttft ", t.ttft_ms < 0 ? "-" : fixed(t.ttft_ms, 0) + " ms");
        ++r;
    }
    if (r < last) {
        int c = pair(f, r, c0, e, "decode  ", right(fixed(t.decode_tok_s, 1), 8));
        c = f.put(r, c, " tok/s", label_style, e);
        pair(f, r, c, e, "  1m ", fixed(t.decode_mean_tok_s, 1));
        ++r;
    }
    if (r < last) {
        const int width = std::min(int(StatsBoard::history_seconds), b.cols - 2);
        f.put(r, c0, sparkline(t.decode_history, width, unicode), Style{Colour::cyan, Weight::bold}, e);
        ++r;
    }
    if (r < last) {
        int c = pair(f, r, c0, e, "tokens in ", std::to_string(t.prompt_tokens));
        c = pair(f, r, c, e, " cached ", std::to_string(t.cached_tokens));
        pair(f, r, c, e, " out ", std::to_string(t.generated_tokens));
        ++r;
    }
    return r - b.row;
}

int draw_drafts(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    const std::optional<DraftFigures>& d = s.drafts;
    const bool figures = d && d->drafting && d->verify_calls > 0;
    std::string note = !d ? "no figures yet" : !d->drafting ? "off" : !figures ? "no verify call yet" : "";
    if (figures) note = std::to_string(d->verify_calls) + " verify calls";
    title_row(f, b, b.row, "Drafts", unicode, note, figures ? label_style : placeholder_style);
    if (b.rows < 2) return 1;
    const int r = b.row + 1, c0 = b.col + 1, e = b.end();
    const Style v = figures ? value_style : placeholder_style;
    const std::string rate = figures ? fixed(d->acceptance_rate * 100, 1) + " %" : "-";
    const std::string len = figures ? fixed(d->mean_accepted_length, 2) : "-";
    const int c = pair(f, r, c0, e, "accepted ", rate, v);
    pair(f, r, c, e, "  mean length ", len, v);
    return 2;
}

int draw_tiers(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    const std::optional<TierFigures>& t = s.tiers;
    const int c0 = b.col + 1, e = b.end(), last = b.row + b.rows;
    int r = b.row + 1;
    if (t && !t->tiered) {  // every expert in one place: nothing to rate
        title_row(f, b, b.row, "Tiers", unicode, "all resident (" + t->resident + ")", label_style);
        const std::string memory = t->resident == "GPU" ? "GPU memory" : "host memory";
        if (r < last) f.put(r++, c0, "every routed expert in " + memory, label_style, e);
        if (r < last) f.put(r++, c0, "nothing moves: no PCIe or SSD traffic", label_style, e);
        if (r < last && !t->why.empty()) f.put(r++, c0, t->why, label_style, e);
        return r - b.row;
    }
    std::string note = "no figures yet";
    if (t) {
        note = "GPU " + std::to_string(t->on_gpu) + "  host " + std::to_string(t->in_host);
        if (t->has_ssd_tier) note += "  SSD " + std::to_string(t->on_ssd);
    }
    title_row(f, b, b.row, "Tiers", unicode, note, t ? label_style : placeholder_style);
    const Style v = t ? value_style : placeholder_style;
    if (r < last) {
        int c = f.put(r, c0, "hit", label_style, e);
        if (t) {
            for (const TierHitRate& h : t->hit_rates)
                c = pair(f, r, c, e, "  " + h.tier + " ", fixed(h.hit_rate * 100, 1) + "%", v);
        } else {
            for (const char* tier : {"GPU", "host", "SSD"}) c = pair(f, r, c, e, std::string("  ") + tier + " ", "-", v);
        }
        ++r;
    }
    if (r < last) {
        int c = pair(f, r, c0, e, "PCIe ", t ? bytes_per_second(t->pcie_bytes_s) : "-", v);
        if (t && !t->has_ssd_tier) pair(f, r, c, e, "  SSD ", "no tier", label_style);
        else pair(f, r, c, e, "  SSD ", t ? bytes_per_second(t->ssd_bytes_s) : "-", v);
        ++r;
    }
    if (r < last) {
        int c = pair(f, r, c0, e, "moves/token ", t ? fixed(t->moves_per_token, 2) : "-", v);
        pair(f, r, c, e, "  CPU experts ", t ? fixed(t->cpu_expert_share * 100, 1) + "%" : "-", v);
        ++r;
    }
    return r - b.row;
}

int draw_gpus(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (!s.gpus || b.rows < 1) return 0;  // no GPU library: no panel
    title_row(f, b, b.row, "GPUs", unicode);
    const int c0 = b.col + 1, e = b.end();
    int r = b.row + 1;
    if (s.gpus->empty() && r < b.row + b.rows) f.put(r++, c0, "the driver reports no GPU", label_style, e);
    for (std::size_t i = 0; i < s.gpus->size() && r < b.row + b.rows; ++i, ++r) {
        const GpuFigures& g = (*s.gpus)[i];
        int c = f.put(r, c0, std::to_string(i), title_style, e);
        c = pair(f, r, c, e, " ", right(g.utilisation_pct < 0 ? "-" : fixed(g.utilisation_pct, 0) + "%", 4));
        c = pair(f, r, c, e, " ", memory_pair(g.memory_used_bytes, g.memory_total_bytes));
        c = pair(f, r, c, e, " ", g.power_w < 0 ? "-" : fixed(g.power_w, 0) + " W");
        c = pair(f, r, c, e, " ", g.sm_clock_mhz < 0 ? "-" : fixed(g.sm_clock_mhz, 0) + " MHz");
        if (e - c > 4) f.put(r, c + 1, g.name, label_style, e);
    }
    return r - b.row;
}

int draw_plane(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    const ExpertPlane& p = s.plane;
    std::string note;
    if (p.layers > 0) note = std::to_string(p.layers) + " layers x " + std::to_string(p.experts) + " experts";
    title_row(f, b, b.row, "Expert plane", unicode, note, label_style);
    const int c0 = b.col + 1, e = b.end();
    int r = b.row + 1;
    const int last = b.row + b.rows;
    if (p.layers <= 0 || p.experts <= 0) {
        if (r < last) f.put(r++, c0, "no model loaded yet", label_style, e);
        return r - b.row;
    }
    const char32_t full = unicode ? U'■' : U'#';
    if (r < last) {  // legend
        int c = c0;
        for (Tier t : {Tier::gpu, Tier::host, Tier::ssd}) {
            c = f.put(r, c, utf8(full), Style{tier_colour(t), Weight::bold}, e);
            c = f.put(r, c, std::string(" ") + to_string(t) + "  ", label_style, e);
        }
        c = f.put(r, c, "heat ", label_style, e);
        for (int level = 0; level < 5; ++level)
            f.put(r, c++, unicode ? glyphs_u[level] : glyphs_a[level], Style{Colour::normal, level >= 4 ? Weight::bold : Weight::normal});
        ++r;
    }
    // Where the figures come from, placeholders marked; the tiers' line only where they
    // are tiered (else the Tiers panel says where every expert is).
    if (r < last && !p.tier_source.empty())
        f.put(r++, c0, p.tier_source, p.tier_placeholder ? placeholder_style : label_style, e);
    if (r < last) f.put(r++, c0, p.heat_source, p.heat_placeholder ? placeholder_style : label_style, e);
    const int label_w = 4;
    const PlaneGrid g = plane_grid(p.layers, p.experts, last - r, e - c0 - label_w - 1);
    if (g.grid_rows <= 0 || g.grid_cols <= 0) return r - b.row;
    const bool has_tier = p.tier.size() == std::size_t(p.layers) * std::size_t(p.experts);
    const bool has_heat = p.heat.size() == std::size_t(p.layers) * std::size_t(p.experts);
    for (int gr = 0; gr < g.grid_rows && r < last; ++gr, ++r) {
        const int l0 = gr * g.layers_per_row, l1 = std::min(p.layers, l0 + g.layers_per_row);
        char label[16];
        std::snprintf(label, sizeof label, "L%-3d", l0);
        f.put(r, c0, label, label_style, e);
        for (int gc = 0; gc < g.grid_cols; ++gc) {
            const int x0 = gc * g.experts_per_cell, x1 = std::min(p.experts, x0 + g.experts_per_cell);
            std::array<int, 4> count{};
            float heat = 0;
            for (int l = l0; l < l1; ++l)
                for (int x = x0; x < x1; ++x) {
                    const std::size_t i = std::size_t(l) * std::size_t(p.experts) + std::size_t(x);
                    ++count[has_tier ? std::size_t(p.tier[i]) : 0];
                    if (has_heat) heat = std::max(heat, p.heat[i]);
                }
            // The tier most of the cell's experts are in (unknown only when all are).
            Tier tier = Tier::unknown;
            int best = 0;
            for (Tier t : {Tier::gpu, Tier::host, Tier::ssd})
                if (count[std::size_t(t)] > best) best = count[std::size_t(t)], tier = t;
            const int level = has_heat ? heat_level(heat) : 2;  // no figures: a flat middle
            const Weight w = level == 0 ? Weight::dim : level >= 4 ? Weight::bold : Weight::normal;
            const char32_t glyph = unicode ? glyphs_u[std::size_t(level)] : glyphs_a[std::size_t(level)];
            for (int k = 0; k < g.cell_width; ++k)
                f.put(r, c0 + label_w + gc * g.cell_width + k, glyph, Style{tier_colour(tier), w});
        }
    }
    return r - b.row;
}

// Lines of text wrapped at `width`, the last `count` of them.
std::vector<std::string> tail_lines(const std::string& text, int width, int count) {
    std::vector<std::string> lines(1);
    int w = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const unsigned char ch = static_cast<unsigned char>(text[i]);
        if (ch == '\n') {
            lines.emplace_back();
            w = 0;
            continue;
        }
        if ((ch & 0xC0) != 0x80) {  // a new code point
            if (w >= width) {
                lines.emplace_back();
                w = 0;
            }
            ++w;
        }
        lines.back() += char(ch);
    }
    if (int(lines.size()) > count) lines.erase(lines.begin(), lines.end() - count);
    return lines;
}

int draw_requests(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    const std::string note = "queued " + std::to_string(s.queued) + "  running " + std::to_string(s.running) +
                             "  done " + std::to_string(s.done);
    title_row(f, b, b.row, "Requests", unicode, note, label_style);
    const int c0 = b.col + 1, e = b.end(), last = b.row + b.rows;
    int r = b.row + 1;
    if (r < last) f.put(r++, c0, "    id  state     prompt  cached  tokens    tok/s", label_style, e);
    std::vector<const RequestRow*> order;
    for (const RequestRow& q : s.requests)
        if (q.state != RequestState::done) order.push_back(&q);
    for (auto it = s.requests.rbegin(); it != s.requests.rend(); ++it)
        if (it->state == RequestState::done) order.push_back(&*it);
    for (const RequestRow* q : order) {
        if (r >= last) break;
        char line[128];
        std::snprintf(line, sizeof line, "%6llu  %-8s %7zu %7zu %7zu %8s", static_cast<unsigned long long>(q->id),
                      to_string(q->state), q->prompt_tokens, q->cached_tokens, q->tokens, fixed(q->tok_s, 1).c_str());
        const Colour colour = q->state == RequestState::running  ? Colour::green
                              : q->state == RequestState::queued ? Colour::yellow
                                                                 : Colour::normal;
        f.put(r++, c0, line, Style{colour, q->state == RequestState::done ? Weight::dim : Weight::normal}, e);
    }
    return r - b.row;
}

int draw_output(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    title_row(f, b, b.row, "Output", unicode);
    int r = b.row + 1;
    for (const std::string& line : tail_lines(s.output, b.cols - 2, b.rows - 1)) f.put(r++, b.col + 1, line, {}, b.end());
    return b.rows;
}

int draw_log(Frame& f, const Box& b, const Snapshot& s, bool unicode) {
    if (b.rows < 1) return 0;
    title_row(f, b, b.row, "Log", unicode);
    const int n = std::min(int(s.log.size()), b.rows - 1);
    for (int i = 0; i < n; ++i)
        f.put(b.row + 1 + i, b.col + 1, s.log[s.log.size() - std::size_t(n) + std::size_t(i)], label_style, b.end());
    return b.rows;
}

void draw_header(Frame& f, const Snapshot& s) {
    f.paint(0, 0, f.cols(), header_style);
    std::string text = " " + s.tool;
    if (!s.title.empty()) text += " | " + s.title;
    text += " | " + fixed(s.elapsed_s, 1) + " s";
    const std::string keys = "q quit ";
    const int end = std::max(0, f.cols() - int(keys.size()) - 1);
    f.put(0, 0, text, header_style, end);
    if (f.cols() >= int(keys.size())) f.put(0, f.cols() - int(keys.size()), keys, header_style);
}

}  // namespace

PlaneGrid plane_grid(int layers, int experts, int rows, int cols) {
    PlaneGrid g;
    if (layers <= 0 || experts <= 0 || rows <= 0 || cols <= 0) {
        g.grid_rows = g.grid_cols = 0;
        return g;
    }
    g.layers_per_row = (layers + rows - 1) / rows;
    g.grid_rows = (layers + g.layers_per_row - 1) / g.layers_per_row;
    g.experts_per_cell = (experts + cols - 1) / cols;
    g.grid_cols = (experts + g.experts_per_cell - 1) / g.experts_per_cell;
    g.cell_width = std::clamp(cols / g.grid_cols, 1, 3);
    return g;
}

int heat_level(float heat) {
    if (!(heat > 0)) return 0;
    return 1 + std::clamp(int(heat * 4.0f), 0, 3);
}

Colour tier_colour(Tier tier) {
    switch (tier) {
        case Tier::gpu: return Colour::green;
        case Tier::host: return Colour::yellow;
        case Tier::ssd: return Colour::red;
        case Tier::unknown: break;
    }
    return Colour::normal;
}

Frame render_dash(const Snapshot& s, int rows, int cols, bool unicode) {
    Frame f(rows, cols);
    if (rows < min_dash_rows || cols < min_dash_cols) {
        f.put(0, 0, "terminal too small for the view (" + std::to_string(min_dash_cols) + "x" +
                        std::to_string(min_dash_rows) + " at least)");
        return f;
    }
    draw_header(f, s);
    // Rows: the header, the two-column top, the bottom strip (a third of the height).
    const int left_rows = 11;
    const int bottom = rows >= 24 ? std::max(8, rows / 3) : std::max(0, rows - 1 - left_rows);
    const int top = rows - 1 - bottom;
    const bool two_columns = cols >= 80;
    const int left_w = two_columns ? (cols >= 120 ? std::min(cols / 2, 70) : 40) : cols;
    Box left{1, 0, top, left_w};
    int used = draw_throughput(f, Box{left.row, left.col, std::min(5, left.rows), left.cols}, s, unicode);
    used += draw_drafts(f, Box{left.row + used, left.col, std::min(2, left.rows - used), left.cols}, s, unicode);
    used += draw_tiers(f, Box{left.row + used, left.col, std::min(4, left.rows - used), left.cols}, s, unicode);
    Box right = two_columns ? Box{1, left_w, top, cols - left_w} : Box{1 + used, 0, top - used, cols};
    if (two_columns)  // a gap between the columns
        right = Box{right.row, right.col + 1, right.rows, right.cols - 1};
    const int gpu_rows = s.gpus ? std::min(int(std::max<std::size_t>(s.gpus->size(), 1)) + 1, right.rows / 2) : 0;
    const int g = draw_gpus(f, Box{right.row, right.col, gpu_rows, right.cols}, s, unicode);
    draw_plane(f, Box{right.row + g, right.col, right.rows - g, right.cols}, s, unicode);
    if (bottom > 0) {
        const int first = 1 + top;
        const int log_rows = std::max(2, bottom * 2 / 5);
        const Box main{first, 0, bottom - log_rows, cols};
        if (s.tool == "aff-serve") draw_requests(f, main, s, unicode);
        else draw_output(f, main, s, unicode);
        draw_log(f, Box{first + main.rows, 0, log_rows, cols}, s, unicode);
    }
    return f;
}

}  // namespace aff::ui
