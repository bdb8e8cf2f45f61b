// The dashboard's layout without a terminal: what each panel shows at 80x24 and how the
// space grows on a larger terminal, read from the Frame as text and styles.
#include "libaff/ui/dash_layout.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace aff::ui;

namespace {

bool contains(const Frame& f, const std::string& text) { return f.text().find(text) != std::string::npos; }

// The column where `text` (ASCII) starts in a row, counted in cells; -1 if absent.
int col_of(const Frame& f, int row, const std::string& text) {
    for (int c = 0; c + int(text.size()) <= f.cols(); ++c) {
        bool match = true;
        for (std::size_t k = 0; k < text.size() && match; ++k) match = f.at(row, c + int(k)).ch == char32_t(text[k]);
        if (match) return c;
    }
    return -1;
}

int row_with(const Frame& f, const std::string& text) {
    for (int r = 0; r < f.rows(); ++r)
        if (f.row_text(r).find(text) != std::string::npos) return r;
    return -1;
}

Snapshot sample(const std::string& tool, int layers, int experts) {
    Snapshot s;
    s.tool = tool;
    s.title = "tiny-a | CPU";
    s.elapsed_s = 3.5;
    s.throughput.prefill_tok_s = 1234.5;
    s.throughput.decode_tok_s = 56.7;
    s.throughput.decode_mean_tok_s = 50.1;
    s.throughput.ttft_ms = 42;
    s.throughput.decode_history = {10, 20, 30, 40};
    s.throughput.prompt_tokens = 4;
    s.throughput.generated_tokens = 8;
    s.plane.layers = layers;
    s.plane.experts = experts;
    s.plane.tier.assign(std::size_t(layers) * experts, Tier::host);
    s.plane.heat_source = "heat: placeholder";
    s.output = "0 5 9 33 17 ";
    s.log = {"aff-run: CPU reference"};
    return s;
}

// Cells of the plane's grid: the rows after the one labelled "L0".
int grid_cells(const Frame& f, Colour colour) {
    int n = 0;
    const int first = row_with(f, "L0 ");
    for (int r = first; r >= 0 && r < f.rows(); ++r) {
        if (f.row_text(r).find("Output") != std::string::npos || f.row_text(r).find("Requests") != std::string::npos)
            break;
        for (int c = 0; c < f.cols(); ++c)
            n += f.at(r, c).style.colour == colour && f.at(r, c).ch != U' ' && f.at(r, c).ch != U'─';
    }
    return n;
}

}  // namespace

TEST_CASE("at 80x24 every panel is there, drafts and tiers marked as having no figures yet", "[ui]") {
    const Frame f = render_dash(sample("aff-run", 6, 8), 24, 80, true);
    REQUIRE(f.rows() == 24);
    REQUIRE(f.cols() == 80);
    for (const char* panel : {"Throughput", "Drafts", "Tiers", "Expert plane", "Output", "Log"}) {
        INFO(panel);
        CHECK(contains(f, panel));
    }
    CHECK(row_with(f, "aff-run | tiny-a | CPU | 3.5 s") == 0);
    CHECK(row_with(f, "q quit") == 0);
    CHECK(contains(f, "prefill   1234.5 tok/s  ttft 42 ms"));
    CHECK(contains(f, "decode      56.7 tok/s  1m 50.1"));
    CHECK(contains(f, "tokens in 4 cached 0 out 8"));
    CHECK(contains(f, "─ Drafts ─ no figures yet ─"));
    CHECK(contains(f, "─ Tiers ─ no figures yet ─"));
    CHECK_FALSE(contains(f, "not built yet"));
    CHECK(contains(f, "6 layers x 8 experts"));
    CHECK(contains(f, "heat: placeholder"));
    CHECK(contains(f, "0 5 9 33 17"));
    CHECK(contains(f, "aff-run: CPU reference"));
    CHECK_FALSE(contains(f, "GPUs"));  // no GPU library: no panel
    CHECK_FALSE(contains(f, "Requests"));
    // The grid: 6 layers of 8 experts, every cell in host memory (yellow).
    CHECK(grid_cells(f, Colour::yellow) >= 48);
    CHECK(grid_cells(f, Colour::green) == 0);
    CHECK(row_with(f, "L5 ") > row_with(f, "L0 "));
}

TEST_CASE("the header bar is reversed and the sparkline drawn", "[ui]") {
    const Frame f = render_dash(sample("aff-run", 6, 8), 24, 80, false);
    CHECK(f.at(0, 0).style.reverse);
    CHECK(f.at(0, 79).style.reverse);
    CHECK(contains(f, ".=*@"));  // 10, 20, 30, 40 tok/s scaled to the largest, oldest left
}

TEST_CASE("aff-serve shows its requests with their states", "[ui]") {
    Snapshot s = sample("aff-serve", 6, 8);
    s.requests = {RequestRow{7, RequestState::running, 120, 80, 33, 12.3}, RequestRow{8, RequestState::queued, 50, 0, 0, 0},
                  RequestRow{5, RequestState::done, 10, 0, 9, 40}, RequestRow{6, RequestState::done, 11, 0, 9, 41}};
    s.queued = 1;
    s.running = 1;
    s.done = 2;
    const Frame f = render_dash(s, 24, 80, true);
    CHECK(contains(f, "Requests ─ queued 1  running 1  done 2"));
    const int running = row_with(f, "     7  running      120      80      33     12.3");
    const int queued = row_with(f, "     8  queued");
    const int newest_done = row_with(f, "     6  done");
    const int older_done = row_with(f, "     5  done");
    REQUIRE(running > 0);
    CHECK(queued == running + 1);
    CHECK(newest_done == queued + 1);
    CHECK((older_done == -1 || older_done == newest_done + 1));
    CHECK(f.at(running, 8).style.colour == Colour::green);
    CHECK_FALSE(contains(f, "Output"));
}

TEST_CASE("the GPU panel shows each GPU when a library reports them", "[ui]") {
    Snapshot s = sample("aff-run", 6, 8);
    GpuFigures g;
    g.name = "NVIDIA H200";
    g.utilisation_pct = 87;
    g.memory_used_bytes = 100.0 * (1ull << 30);
    g.memory_total_bytes = 139.8 * (1ull << 30);
    g.power_w = 312;
    g.sm_clock_mhz = 1980;
    s.gpus = std::vector<GpuFigures>{g, g};
    const Frame f = render_dash(s, 24, 80, true);
    CHECK(contains(f, "GPUs"));
    CHECK(contains(f, "0  87% 100.0/139.8 GiB 312 W 1980 MHz"));
    CHECK(contains(f, "1  87%"));
    // 120 columns leave room for the name.
    CHECK(contains(render_dash(s, 40, 120, true), "1980 MHz NVIDIA H200"));
    s.gpus = std::vector<GpuFigures>{};
    CHECK(contains(render_dash(s, 24, 80, true), "the driver reports no GPU"));
}

TEST_CASE("V4-Flash's plane is binned to fit, and a larger terminal shows more of it", "[ui]") {
    const PlaneGrid small = plane_grid(43, 256, 10, 34);
    CHECK(small.layers_per_row == 5);
    CHECK(small.grid_rows == 9);
    CHECK(small.experts_per_cell == 8);
    CHECK(small.grid_cols == 32);
    CHECK(small.cell_width == 1);
    const PlaneGrid tiny = plane_grid(6, 8, 10, 34);
    CHECK(tiny.layers_per_row == 1);
    CHECK(tiny.grid_cols == 8);
    CHECK(tiny.cell_width == 3);
    CHECK(plane_grid(0, 8, 10, 10).grid_rows == 0);

    const Snapshot s = sample("aff-run", 43, 256);
    const Frame f80 = render_dash(s, 24, 80, true), f160 = render_dash(s, 50, 160, true);
    CHECK(grid_cells(f160, Colour::yellow) > 2 * grid_cells(f80, Colour::yellow));
    CHECK(row_with(f160, "L2 ") > 0);   // 50 rows: two layers a row
    CHECK(row_with(f160, "L1 ") == -1);
    CHECK(row_with(f80, "L4 ") > 0);    // 24 rows: four layers a row
    CHECK(row_with(f80, "L2 ") == -1);
}

TEST_CASE("heat is brightness and tier is colour", "[ui]") {
    CHECK(heat_level(0) == 0);
    CHECK(heat_level(0.01f) == 1);
    CHECK(heat_level(0.5f) == 3);
    CHECK(heat_level(1) == 4);
    CHECK(tier_colour(Tier::gpu) == Colour::green);
    CHECK(tier_colour(Tier::host) == Colour::yellow);
    CHECK(tier_colour(Tier::ssd) == Colour::red);
    Snapshot s = sample("aff-run", 1, 3);
    s.plane.tier = {Tier::gpu, Tier::host, Tier::ssd};
    s.plane.heat = {0.0f, 0.5f, 1.0f};
    s.plane.heat_placeholder = false;
    const Frame f = render_dash(s, 24, 80, true);
    const int r = row_with(f, "L0 ");
    REQUIRE(r > 0);
    const int c = col_of(f, r, "L0 ") + 4;  // after the label, one cell of 3 columns per expert
    CHECK(f.at(r, c).style == Style{Colour::green, Weight::dim});
    CHECK(f.at(r, c).ch == U'·');
    CHECK(f.at(r, c + 3).style == Style{Colour::yellow, Weight::normal});
    CHECK(f.at(r, c + 6).style == Style{Colour::red, Weight::bold});
    CHECK(f.at(r, c + 6).ch == U'█');
}

TEST_CASE("a terminal below 40x12 gets a note instead of a squeezed view", "[ui]") {
    const Frame f = render_dash(sample("aff-run", 6, 8), 10, 39, true);
    CHECK(f.row_text(0).rfind("terminal too small", 0) == 0);
    CHECK_FALSE(contains(f, "Throughput"));
}

TEST_CASE("long text is clipped inside its panel", "[ui]") {
    Snapshot s = sample("aff-run", 6, 8);
    s.title = std::string(200, 't');
    s.log = {std::string(300, 'l')};
    s.output = std::string(1000, 'o');
    const Frame f = render_dash(s, 24, 80, true);
    CHECK(row_with(f, "q quit") == 0);  // the title did not push the keys off
    CHECK(f.row_text(23).size() <= 80);
    CHECK(contains(f, std::string(78, 'o')));
}

TEST_CASE("the Drafts panel says off, no verify call yet, or the acceptance", "[ui]") {
    Snapshot s = sample("aff-run", 6, 8);
    s.drafts = DraftFigures{false};
    CHECK(contains(render_dash(s, 24, 80, true), "─ Drafts ─ off ─"));
    s.drafts = DraftFigures{true};
    CHECK(contains(render_dash(s, 24, 80, true), "─ Drafts ─ no verify call yet ─"));
    s.drafts = DraftFigures{true, 12, 0.625, 2.25};
    const Frame f = render_dash(s, 24, 80, true);
    CHECK(contains(f, "─ Drafts ─ 12 verify calls ─"));
    CHECK(contains(f, "accepted 62.5 %  mean length 2.25"));
}
