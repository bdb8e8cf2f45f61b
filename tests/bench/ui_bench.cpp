// What the live view costs, measured in its parts without a terminal (issue 19):
//   1. StatsBoard::add_token, the only call the compute thread makes per token
//      (figure: ns a call; bound: 1 % of a decode step of V4-Flash on the H200, 96 us at
//      the 9.6 ms a step RESULTS.md gives, so want < 96 000 ns);
//   2. one dashboard frame off the compute thread: snapshot + layout at 80x24 and at
//      160x50 with V4-Flash's 43 x 256 expert plane and a full minute of history
//      (figure: us a frame and the share of one core at 5 frames a second; want < 1 %).
// The terminal write itself (ncurses' refresh) is measured end to end by ui_cost_bench.sh.
// usage: ui_bench [CALLS=2000000]
#include "libaff/ui/dash_layout.hpp"
#include "libaff/ui/stats.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
    const long calls = argc > 1 ? std::atol(argv[1]) : 2000000;
    aff::ui::StatsBoard board("aff-serve");
    const auto id = board.add_request(4096);
    board.start_request(id);
    auto t = Clock::now();
    for (long i = 0; i < calls; ++i) board.add_token(id);
    const double ns = seconds(t) / double(calls) * 1e9;
    const double step_bound_ns = 96000;
    std::printf("ui_bench: add_token %.1f ns a call; bound %.0f ns (1%% of a 9.6 ms V4-Flash decode step); ratio %.5f\n",
                ns, step_bound_ns, ns / step_bound_ns);

    // A minute of history, V4-Flash's plane with heat, a few requests.
    aff::ui::ExpertPlane plane;
    plane.layers = 43;
    plane.experts = 256;
    plane.tier.assign(43 * 256, aff::ui::Tier::host);
    plane.heat.assign(43 * 256, 0.0f);
    for (std::size_t i = 0; i < plane.heat.size(); ++i) plane.heat[i] = float((i * 2654435761u) % 1000) / 1000.0f;
    plane.heat_placeholder = false;
    plane.heat_source = "bench";
    board.publish_plane(plane);
    for (int r = 0; r < 20; ++r) board.finish_request(board.add_request(100));
    for (int l = 0; l < 64; ++l) board.add_log("aff-serve: POST /v1/chat/completions 200 prompt=1000 cached=900 completion=64 1234ms");
    const auto now = Clock::now() + std::chrono::seconds(61);
    for (auto [rows, cols] : {std::pair{24, 80}, std::pair{50, 160}}) {
        const int frames = 2000;
        std::size_t sink = 0;
        t = Clock::now();
        for (int f = 0; f < frames; ++f) {
            const aff::ui::Snapshot s = board.snapshot(now);
            sink += render_dash(s, rows, cols, true).rows();
        }
        const double us = seconds(t) / frames * 1e6;
        const double share = us * 5 / 1e6 * 100;  // % of one core at 5 Hz
        std::printf("ui_bench: frame %dx%d %.1f us (snapshot + layout); at 5 Hz %.3f %% of one core; bound 1 %%; ratio %.4f%s\n",
                    cols, rows, us, share, share / 1.0, sink ? "" : " ");
    }
    return 0;
}
