// The plane's heat from routing events: counts per layer and expert, scaled to the
// hottest, published to the board, and every event passed on to the next observer.
#include "libaff/ui/route_heat.hpp"
#include "libaff/ui/plane_source.hpp"

#include <catch2/catch.hpp>

#include <thread>

using namespace aff;
using namespace aff::ui;

namespace {

struct Counting final : RouteObserver {
    int routes = 0, ends = 0;
    void on_route(const RouteEvent&) override { ++routes; }
    void on_forward_end() override { ++ends; }
};

ModelConfig config(int layers, int experts) {
    ModelConfig c;
    c.num_layers = layers;
    c.n_routed_experts = experts;
    return c;
}

}  // namespace

TEST_CASE("routed tokens become the plane's heat, the hottest expert at 1", "[ui]") {
    const ModelConfig c = config(2, 4);
    StatsBoard board("aff-run");
    board.publish_plane(resident_expert_plane(c, false));
    Counting next;
    RouteHeat heat(board, resident_expert_plane(c, false), &next, 1e9);  // no decay within the test
    const std::vector<std::int32_t> tokens{7, 8};
    // Layer 1: token 0 to experts 2 and 3, token 1 to 2 and 0 (K = 2).
    const std::vector<int> experts{2, 3, 2, 0};
    const std::vector<float> weights{0.5f, 0.5f, 0.5f, 0.5f};
    heat.on_route(RouteEvent{1, 0, tokens, 2, experts, weights});
    heat.on_route(RouteEvent{9, 0, tokens, 2, experts, weights});  // a layer past the plane: ignored
    heat.on_forward_end();
    CHECK(next.routes == 2);
    CHECK(next.ends == 1);
    const std::vector<double> expected{0, 0, 0, 0, 1, 0, 2, 1};
    REQUIRE(heat.counts().size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(heat.counts()[i] == Approx(expected[i]));
    const Snapshot s = board.snapshot();
    REQUIRE(s.plane.heat.size() == 8);
    CHECK(s.plane.heat[6] == 1.0f);  // layer 1, expert 2
    CHECK(s.plane.heat[4] == 0.5f);
    CHECK(s.plane.heat[0] == 0.0f);
    CHECK_FALSE(s.plane.heat_placeholder);
    CHECK(s.plane.tier[6] == Tier::host);
    CHECK(s.plane.heat_source.find("routed") != std::string::npos);
}

TEST_CASE("old routing fades with the half-life", "[ui]") {
    const ModelConfig c = config(1, 2);
    StatsBoard board("aff-run");
    board.publish_plane(resident_expert_plane(c, true));
    RouteHeat heat(board, resident_expert_plane(c, true), nullptr, 0.05);
    const std::vector<std::int32_t> tokens{1};
    const std::vector<int> experts{0};
    const std::vector<float> weights{1.0f};
    for (int i = 0; i < 8; ++i) heat.on_route(RouteEvent{0, 0, tokens, 1, experts, weights});
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // three half-lives at least
    heat.publish();
    CHECK(heat.counts()[0] <= 1.0 + 1e-9);  // 8 halved three times at least
    CHECK(heat.counts()[0] > 0);
    CHECK(board.snapshot().plane.heat[0] == 1.0f);  // still the hottest
    CHECK(board.snapshot().plane.tier[0] == Tier::gpu);
}

TEST_CASE("the heat leaves the plane's tiers as another source published them", "[ui]") {
    const ModelConfig c = config(1, 2);
    StatsBoard board("aff-run");
    board.publish_plane(resident_expert_plane(c, true));
    board.publish_plane_tiers({Tier::gpu, Tier::host}, "tiers: test");
    RouteHeat heat(board, resident_expert_plane(c, true), nullptr, 1e9);
    const std::vector<std::int32_t> tokens{1};
    const std::vector<int> experts{1};
    const std::vector<float> weights{1.0f};
    heat.on_route(RouteEvent{0, 0, tokens, 1, experts, weights});
    heat.publish();
    const Snapshot s = board.snapshot();
    CHECK(s.plane.tier[1] == Tier::host);
    CHECK(s.plane.tier_source == "tiers: test");
    CHECK(s.plane.heat[1] == 1.0f);
    board.publish_plane_tiers({Tier::gpu}, "wrong size");  // ignored
    CHECK(board.snapshot().plane.tier_source == "tiers: test");
}
