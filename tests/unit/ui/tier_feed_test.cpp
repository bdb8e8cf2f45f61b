// The Tiers panel and the expert plane's tier colours from a sequence's tier snapshot: a
// fake sequence reports a known map and known counters, and the board's figures, the
// panel's text and the plane's cell colours must say exactly those.
#include "libaff/ui/dash_layout.hpp"
#include "libaff/ui/figures_text.hpp"
#include "libaff/ui/plane_source.hpp"
#include "libaff/ui/tier_feed.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace aff;
using namespace aff::ui;
using namespace std::chrono_literals;
using PT = placement::Tier;

namespace {

// A sequence that runs nothing and reports the tiers it is given.
class FakeTieredSequence final : public Sequence {
public:
    explicit FakeTieredSequence(ExpertTierSnapshot s, bool gpu = true) : snapshot(std::move(s)), gpu_(gpu) {}
    std::string describe() const override { return "fake"; }
    bool on_gpu() const override { return gpu_; }
    std::size_t vocab_size() const override { return 8; }
    std::int64_t position() const override { return 0; }
    void reset() override {}
    std::vector<float> forward(std::span<const std::int32_t>, bool) override { return {}; }
    ExpertTierSnapshot expert_tiers() const override {
        ++calls;
        return snapshot;
    }
    ExpertTierSnapshot snapshot;
    mutable int calls = 0;

private:
    bool gpu_;
};

// 3 layers of 4 experts: 4 on the GPU, 8 in the host pool.
ExpertTierSnapshot known_tiers() {
    ExpertTierSnapshot s;
    s.tiered = true;
    s.why = "--gpu-expert-mib";
    s.strategy = "heat";
    s.layers = 3;
    s.experts = 4;
    s.where = {PT::gpu, PT::gpu, PT::host, PT::host,   // layer 0
               PT::host, PT::gpu, PT::host, PT::host,  // layer 1
               PT::gpu, PT::host, PT::host, PT::host}; // layer 2
    s.counters.gpu_experts = 4;
    s.counters.host_experts = 8;
    s.counters.expert_reads = 200;
    s.counters.gpu_hits = 150;
    s.counters.host_hits = 50;
    s.counters.tokens = 40;
    s.counters.moves = 10;
    s.counters.pcie_bytes = 1000;
    return s;
}

ModelConfig config(int layers, int experts) {
    ModelConfig c;
    c.num_layers = layers;
    c.n_routed_experts = experts;
    return c;
}

bool contains(const Frame& f, const std::string& text) { return f.text().find(text) != std::string::npos; }

int row_with(const Frame& f, const std::string& text) {
    for (int r = 0; r < f.rows(); ++r)
        if (f.row_text(r).find(text) != std::string::npos) return r;
    return -1;
}

// The colours of the plane's cells in the row labelled `label` ("L0 "): one per cell of
// `width` columns, read after the 4-column label.
std::vector<Colour> cell_colours(const Frame& f, const std::string& label, int cells, int width) {
    std::vector<Colour> out;
    const int r = row_with(f, label);
    if (r < 0) return out;
    const std::string row = f.row_text(r);
    int c0 = -1;
    for (int c = 0; c + 2 < f.cols(); ++c)
        if (f.at(r, c).ch == char32_t(label[0]) && f.at(r, c + 1).ch == char32_t(label[1]) && f.at(r, c + 2).ch == U' ') {
            c0 = c;
            break;
        }
    if (c0 < 0) return out;
    for (int k = 0; k < cells; ++k) out.push_back(f.at(r, c0 + 4 + k * width).style.colour);
    return out;
}

}  // namespace

TEST_CASE("a tiered snapshot becomes the panel's figures: counts, hit rates, moves a token", "[ui]") {
    const TierFigures f = tier_figures(known_tiers(), true);
    CHECK(f.tiered);
    CHECK(f.on_gpu == 4);
    CHECK(f.in_host == 8);
    CHECK(f.on_ssd == 0);
    CHECK_FALSE(f.has_ssd_tier);
    REQUIRE(f.hit_rates.size() == 2);  // no SSD tier: no SSD hit rate
    CHECK(f.hit_rates[0].tier == "GPU");
    CHECK(f.hit_rates[0].hit_rate == Approx(0.75));
    CHECK(f.hit_rates[1].tier == "host");
    CHECK(f.hit_rates[1].hit_rate == Approx(0.25));
    CHECK(f.moves_per_token == Approx(0.25));
    // With the decode prefetch: the share of reads it had copied into GPU memory (of the host's).
    ExpertTierSnapshot pf = known_tiers();
    pf.counters.prefetched = 40;
    pf.counters.prefetch_hits = 30;
    const TierFigures g = tier_figures(pf, true);
    REQUIRE(g.hit_rates.size() == 3);
    CHECK(g.hit_rates[2].tier == "prefetched");
    CHECK(g.hit_rates[2].hit_rate == Approx(0.15));
    CHECK(f.cpu_expert_share == 0);
    const std::vector<Tier> map = plane_tiers(known_tiers());
    REQUIRE(map.size() == 12);
    CHECK(map[0] == Tier::gpu);
    CHECK(map[2] == Tier::host);
    CHECK(map[5] == Tier::gpu);
    CHECK(map[8] == Tier::gpu);
    CHECK(map[11] == Tier::host);
}

TEST_CASE("the feed turns byte totals into a rate over the last second and maps the plane", "[ui]") {
    StatsBoard board("aff-run");
    board.publish_plane(resident_expert_plane(config(3, 4), true));  // all GPU until the feed says otherwise
    TierFeed feed(board);
    const auto t0 = TierFeed::Clock::now();
    ExpertTierSnapshot s = known_tiers();
    feed.publish(s, true, t0);
    Snapshot v = board.snapshot();
    REQUIRE(v.tiers);
    CHECK(v.tiers->pcie_bytes_s == 0);  // one snapshot: no rate yet
    REQUIRE(v.plane.tier.size() == 12);
    CHECK(v.plane.tier[1] == Tier::gpu);
    CHECK(v.plane.tier[4] == Tier::host);  // was GPU in the resident plane
    CHECK_FALSE(v.plane.tier_placeholder);
    CHECK(v.plane.tier_source == "tiers: expert table, 10 moves");
    s.counters.pcie_bytes += 500'000'000;
    feed.publish(s, true, t0 + 500ms);
    CHECK(board.snapshot().tiers->pcie_bytes_s == Approx(1e9));  // 0.5 GB in 0.5 s
    s.counters.pcie_bytes += 3'000'000'000;
    feed.publish(s, true, t0 + 2000ms);  // the 0 s sample is dropped: the window starts at 0.5 s
    CHECK(board.snapshot().tiers->pcie_bytes_s == Approx(3e9 / 1.5));
    // A move changes the map: expert 3 of layer 0 promoted, expert 1 demoted.
    s.where[3] = PT::gpu;
    s.where[1] = PT::host;
    s.counters.moves = 11;
    feed.publish(s, true, t0 + 2100ms);
    v = board.snapshot();
    CHECK(v.plane.tier[3] == Tier::gpu);
    CHECK(v.plane.tier[1] == Tier::host);
    CHECK(v.plane.tier_source.find("11 moves") != std::string::npos);
    // The run ends: no call, no traffic; the counts stay.
    feed.idle();
    v = board.snapshot();
    CHECK(v.tiers->pcie_bytes_s == 0);
    CHECK(v.tiers->on_gpu == 4);
    CHECK(v.tiers->hit_rates[0].hit_rate == Approx(0.75));
}

TEST_CASE("between calls the feed asks the sequence at most 5 times a second", "[ui]") {
    StatsBoard board("aff-serve");
    board.publish_plane(resident_expert_plane(config(3, 4), true));
    TierFeed feed(board);
    FakeTieredSequence seq(known_tiers());
    const auto t0 = TierFeed::Clock::now();
    feed.between_calls(seq, t0);
    feed.between_calls(seq, t0 + 50ms);
    feed.between_calls(seq, t0 + 199ms);
    CHECK(seq.calls == 1);
    feed.between_calls(seq, t0 + 200ms);
    CHECK(seq.calls == 2);
    REQUIRE(board.snapshot().tiers);
    CHECK(board.snapshot().tiers->in_host == 8);
}

TEST_CASE("the Tiers panel and the plane show the known tiers at 80x24", "[ui]") {
    StatsBoard board("aff-run");
    board.set_title("fake | GPU 0");
    board.publish_plane(resident_expert_plane(config(3, 4), true));
    TierFeed feed(board);
    ExpertTierSnapshot s = known_tiers();
    const auto t0 = TierFeed::Clock::now();
    feed.publish(s, true, t0);
    s.counters.pcie_bytes += 1'250'000'000;
    feed.publish(s, true, t0 + 1000ms);
    const Frame f = render_dash(board.snapshot(), 24, 80, true);
    const int title = row_with(f, "─ Tiers ─ GPU 4  host 8 ─");
    REQUIRE(title > 0);
    CHECK(row_with(f, "hit  GPU 75.0%  host 25.0%") == title + 1);
    CHECK(row_with(f, "PCIe 1.25 GB/s  SSD no tier") == title + 2);
    CHECK(row_with(f, "moves/token 0.25  CPU experts 0.0%") == title + 3);
    CHECK_FALSE(contains(f, "not built yet"));
    CHECK(contains(f, "tiers: expert table, 10 moves"));
    CHECK(contains(f, "heat: placeholder"));  // no route hook in this test: the heat stays marked
    // The plane: one 3-column cell per expert, coloured by tier (GPU green, host yellow).
    const Colour G = Colour::green, H = Colour::yellow;
    CHECK(cell_colours(f, "L0 ", 4, 3) == std::vector<Colour>{G, G, H, H});
    CHECK(cell_colours(f, "L1 ", 4, 3) == std::vector<Colour>{H, G, H, H});
    CHECK(cell_colours(f, "L2 ", 4, 3) == std::vector<Colour>{G, H, H, H});
    const std::string line = plain_line(board.snapshot());
    CHECK(line.find(" tier_GPU=4 tier_host=8 hit_GPU=0.750 hit_host=0.250 pcie=1.25GB/s ssd=no-tier moves_per_tok=0.25 "
                    "cpu_share=0.000") != std::string::npos);
}

TEST_CASE("an SSD tier, where one exists, gets its count, hit rate, rate and red cells", "[ui]") {
    StatsBoard board("aff-run");
    board.publish_plane(resident_expert_plane(config(3, 4), true));
    TierFeed feed(board);
    ExpertTierSnapshot s = known_tiers();
    s.has_ssd_tier = true;
    s.where[10] = s.where[11] = PT::ssd;
    s.counters.host_experts = 6;
    s.counters.ssd_experts = 2;
    s.counters.ssd_reads = 20;
    s.counters.host_hits = 30;
    const auto t0 = TierFeed::Clock::now();
    feed.publish(s, true, t0);
    s.counters.ssd_bytes += 2'000'000'000;
    feed.publish(s, true, t0 + 1000ms);
    const Frame f = render_dash(board.snapshot(), 24, 80, true);
    CHECK(contains(f, "─ Tiers ─ GPU 4  host 6  SSD 2 ─"));
    CHECK(contains(f, "hit  GPU 75.0%  host 15.0%  SSD 10.0%"));
    CHECK(contains(f, "SSD 2.00 GB/s"));
    CHECK(cell_colours(f, "L2 ", 4, 3) == std::vector<Colour>{Colour::green, Colour::yellow, Colour::red, Colour::red});
}

TEST_CASE("a sequence without tiers says where every expert is and leaves the plane one colour", "[ui]") {
    for (bool gpu : {false, true}) {
        INFO(gpu);
        StatsBoard board("aff-run");
        board.publish_plane(resident_expert_plane(config(3, 4), gpu));
        TierFeed feed(board);
        ExpertTierSnapshot none;
        if (gpu) none.why = "every expert in the weight arena";
        FakeTieredSequence seq(none, gpu);
        feed.between_calls(seq);
        const Snapshot v = board.snapshot();
        REQUIRE(v.tiers);
        CHECK_FALSE(v.tiers->tiered);
        CHECK(v.tiers->resident == (gpu ? "GPU" : "CPU"));
        CHECK(v.plane.tier_source.empty());
        for (Tier t : v.plane.tier) CHECK(t == (gpu ? Tier::gpu : Tier::host));
        const Frame f = render_dash(v, 24, 80, true);
        CHECK(contains(f, gpu ? "─ Tiers ─ all resident (GPU) ─" : "─ Tiers ─ all resident (CPU) ─"));
        CHECK(contains(f, gpu ? "every routed expert in GPU memory" : "every routed expert in host memory"));
        CHECK(contains(f, "nothing moves: no PCIe or SSD traffic"));
        if (gpu) CHECK(contains(f, "every expert in the weight arena"));
        CHECK_FALSE(contains(f, "hit  GPU"));
        CHECK(cell_colours(f, "L1 ", 4, 3) == std::vector<Colour>(4, gpu ? Colour::green : Colour::yellow));
        CHECK(plain_line(v).find(gpu ? " tiers=all-resident-GPU" : " tiers=all-resident-CPU") != std::string::npos);
    }
}
