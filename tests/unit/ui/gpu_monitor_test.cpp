// GPU readings through dlopen: a missing library gives no monitor (the panel hides), and
// a library answering NVML's calls gives its figures, -1 where it reports none.
#include "libaff/ui/gpu_monitor.hpp"

#include <catch2/catch.hpp>

using namespace aff::ui;

TEST_CASE("a GPU library that is not there gives no monitor and no error", "[ui]") {
    CHECK(GpuMonitor::open_nvml("libaff-no-such-nvml.so.1") == nullptr);
    CHECK(GpuMonitor::open_rocm_smi("libaff-no-such-rocm-smi.so") == nullptr);
    // A library without NVML's symbols (libm is everywhere) does not start either.
    CHECK(GpuMonitor::open_nvml("libm.so.6") == nullptr);
}

TEST_CASE("NVML readings are taken through dlopen", "[ui]") {
    auto m = GpuMonitor::open_nvml(AFF_FAKE_NVML);
    REQUIRE(m != nullptr);
    CHECK(m->library() == "NVML");
    const auto g = m->sample();
    REQUIRE(g.size() == 2);
    CHECK(g[0].name == "Fake GPU A");
    CHECK(g[0].utilisation_pct == 87);
    CHECK(g[0].memory_used_bytes == double(100ull << 30));
    CHECK(g[0].memory_total_bytes == double(144ull << 30));
    CHECK(g[0].power_w == Approx(312.5));
    CHECK(g[0].sm_clock_mhz == 1980);
    CHECK(g[0].memory_clock_mhz == 2619);
    CHECK(g[1].name == "Fake GPU B");
    CHECK(g[1].utilisation_pct == 3);
    CHECK(g[1].power_w == -1);  // not supported: left unreported
}
