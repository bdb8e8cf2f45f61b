// Runs every device test (tests/gpu/*_test.cpp) on the first visible GPU and prints one
// table row per comparison; exits 1 if any row fails or a test throws. Not part of ctest
// (CI has no GPU): tests/gpu/run.sh builds and runs it on a machine with one.
// usage: aff_gpu_tests [NAME...]   only the tests whose name starts with one of the NAMEs
// (e.g. "moe_gemv", to run one family under compute-sanitizer in reasonable time).
#include "device_test.hpp"

#include "libaff/core/crash_report.hpp"
#include "libaff/core/error.hpp"

#include <cstdio>
#include <exception>

namespace aff::gpu::test {
std::vector<std::pair<std::string, TestFn>>& registry() {
    static std::vector<std::pair<std::string, TestFn>> tests;
    return tests;
}
}  // namespace aff::gpu::test

int main(int argc, char** argv) {
    using namespace aff::gpu;
    aff::install_crash_report("aff_gpu_tests");
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash must not swallow the rows printed before it
    try {
        const std::vector<int> devices = select_devices(1);
        use_device(devices[0]);
        const DeviceInfo info = device_info(devices[0]);
        const MemoryInfo mem = memory_info();
        std::printf("device %d: %s, sm %d.%d, %d multiprocessors, warp %d, %.1f GiB free of %.1f GiB\n",
                    info.ordinal, info.name.c_str(), info.compute_major, info.compute_minor, info.multiprocessors,
                    info.warp_size, mem.free_bytes / 1073741824.0, mem.total_bytes / 1073741824.0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aff_gpu_tests: %s\n", e.what());
        return 1;
    }
    int failed = 0;
    std::vector<test::Row> rows;
    for (auto& [name, fn] : test::registry()) {
        bool wanted = argc < 2;
        for (int i = 1; i < argc; ++i) wanted = wanted || name.rfind(argv[i], 0) == 0;
        if (!wanted) continue;
        try {
            fn(rows);
        } catch (const std::exception& e) {
            rows.push_back({name, std::string("threw: ") + e.what(), INFINITY, 0.0, false});
        }
    }
    std::printf("%-12s %-52s %12s %10s  %s\n", "family", "check", "nmse", "bound", "result");
    for (const test::Row& r : rows) {
        std::printf("%-12s %-52s %12.3e %10.1e  %s\n", r.family.c_str(), r.check.c_str(), r.nmse, r.bound,
                    r.pass ? "PASS" : "FAIL");
        failed += r.pass ? 0 : 1;
    }
    std::printf("%zu checks, %d failed\n", rows.size(), failed);
    return failed == 0 && !rows.empty() ? 0 : 1;
}
