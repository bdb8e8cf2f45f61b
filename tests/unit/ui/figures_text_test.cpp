// Figures as text: units, the sparkline's scaling, and the plain line's fields.
#include "libaff/ui/figures_text.hpp"

#include <catch2/catch.hpp>

using namespace aff::ui;

TEST_CASE("numbers print with their decimals, unreported ones as a dash", "[ui]") {
    CHECK(fixed(12.345, 1) == "12.3");
    CHECK(fixed(0, 0) == "0");
    CHECK(fixed(-1, 2) == "-");
    CHECK(memory_pair(1.5 * (1 << 30), 80.0 * (1 << 30)) == "1.5/80.0 GiB");
    CHECK(memory_pair(-1, 10) == "-");
    CHECK(bytes_per_second(-1) == "-");
    CHECK(bytes_per_second(3.21e9) == "3.21 GB/s");
}

TEST_CASE("the sparkline scales to its maximum, newest on the right", "[ui]") {
    CHECK(sparkline({}, 4, false) == "    ");
    CHECK(sparkline({8, 4, 0, 1}, 4, false) == "@= _");
    CHECK(sparkline({1, 2, 3, 4, 5, 6, 7, 8}, 3, false) == "*#@");  // only the last three, scaled to 8
    CHECK(sparkline({2, 2}, 5, false) == "   @@");
    CHECK(sparkline({1, 8}, 2, true) == "▁█");
    CHECK(sparkline({5}, 0, true).empty());
}

TEST_CASE("the plain line has every figure in a fixed order", "[ui]") {
    Snapshot s;
    s.tool = "aff-run";
    s.elapsed_s = 2.04;
    s.throughput.prefill_tok_s = 400;
    s.throughput.decode_tok_s = 99.96;
    s.throughput.decode_mean_tok_s = 97.5;
    s.throughput.ttft_ms = 120.4;
    s.throughput.prompt_tokens = 40;
    s.throughput.generated_tokens = 11;
    s.running = 1;
    CHECK(plain_line(s) ==
          "aff-run: stats t=2.0s prefill=400.0tok/s decode=100.0tok/s decode_1m=97.5tok/s ttft=120ms prompt=40 "
          "cached=0 generated=11 queued=0 running=1 done=0 drafts=none-yet tiers=none-yet");
    s.throughput.ttft_ms = -1;
    s.drafts = DraftFigures{true, 8, 0.625, 2.25};
    TierFigures t;
    t.tiered = true;
    t.on_gpu = 30;
    t.in_host = 98;
    t.hit_rates = {{"GPU", 0.9}, {"host", 0.1}};
    t.pcie_bytes_s = 12.5e9;
    t.moves_per_token = 0.5;
    s.tiers = t;
    GpuFigures g;
    g.utilisation_pct = 87;
    g.memory_used_bytes = 100.0 * (1 << 30);
    g.memory_total_bytes = 144.0 * (1 << 30);
    s.gpus = std::vector<GpuFigures>{g};
    const std::string l = plain_line(s);
    CHECK(l.find(" ttft=- ") != std::string::npos);
    CHECK(l.find(" verify_calls=8 accept=0.625 accepted_len=2.25 ") != std::string::npos);
    CHECK(l.find(" tier_GPU=30 tier_host=98 hit_GPU=0.900 hit_host=0.100 pcie=12.50GB/s ssd=no-tier moves_per_tok=0.50 "
                 "cpu_share=0.000") != std::string::npos);
    CHECK(l.find(" gpu0_util=87% gpu0_mem=100.0/144.0GiB gpu0_power=- gpu0_sm=-") != std::string::npos);
    CHECK(l.find("none-yet") == std::string::npos);
    for (char c : l) CHECK((c >= 0x20 && c < 0x7F));  // no escape codes, one line
}
