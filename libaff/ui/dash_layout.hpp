// The dashboard's layout: a Snapshot drawn into a Frame of the terminal's size, with no
// terminal involved. At 80x24 everything fits (two columns over a bottom strip); a larger
// terminal gives the sparkline, the expert plane and the request/output strip more room.
// Panels: Throughput, Drafts, Tiers (left); GPUs (hidden without a GPU library) and the
// expert plane (right); Requests (aff-serve) or Output (aff-run), and the Log (bottom).
#pragma once

#include "libaff/ui/frame.hpp"
#include "libaff/ui/stats.hpp"

#include <string>

namespace aff::ui {

constexpr int min_dash_rows = 12, min_dash_cols = 40;

// The expert plane's binning for a grid of at most rows x cols cells: each cell covers
// layers_per_row layers and experts_per_cell experts, and is cell_width columns wide.
struct PlaneGrid {
    int layers_per_row = 1, experts_per_cell = 1, cell_width = 1;
    int grid_rows = 0, grid_cols = 0;  // cells used
};
PlaneGrid plane_grid(int layers, int experts, int rows, int cols);

// A cell's heat in [0, 1] as a level 0..4 (0: never routed to).
int heat_level(float heat);
// Colour of a tier in the plane and its legend.
Colour tier_colour(Tier tier);

Frame render_dash(const Snapshot& snapshot, int rows, int cols, bool unicode);

}  // namespace aff::ui
