// Tests for AFF_GPU_CHECK and the kernel argument errors (kernels/check.hpp), in GPU builds
// only: the error text comes from the GPU runtime's own tables, which answer without a GPU,
// so these run in CI too. Argument checks fire before any launch, so no device is needed.
#include "libaff/core/error.hpp"

#if defined(AFF_HAVE_GPU)
#include "kernels/check.hpp"
#include "kernels/fp8_gemv.hpp"
#include "kernels/router_topk.hpp"

#include <catch2/catch.hpp>

#include <string>

TEST_CASE("AFF_GPU_CHECK throws a device error naming the call, file, line and runtime error", "[gpu]") {
    CHECK_NOTHROW(AFF_GPU_CHECK(0));
    try {
        AFF_GPU_CHECK(2);  // hipErrorOutOfMemory / cudaErrorMemoryAllocation
        FAIL("AFF_GPU_CHECK(2) did not throw");
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::device);
        const std::string text = e.what();
        CHECK(text.rfind("2 failed at check_test.cpp:", 0) == 0);
        CHECK(text.find("emory") != std::string::npos);  // "out of memory" in either runtime's words
    }
}

TEST_CASE("kernel launchers refuse shapes they cannot handle before launching", "[gpu]") {
    float* none = nullptr;
    const uint8_t* bytes = nullptr;
    try {
        aff::gpu::fp8_gemv(bytes, bytes, 64, 100, none, 1, none, nullptr);
        FAIL("k = 100 accepted");
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::unsupported);
        CHECK(std::string(e.what()) == "fp8_gemv: k must be a positive multiple of 128");
    }
    CHECK_THROWS_AS(aff::gpu::fp8_gemv(bytes, bytes, 64, 128, none, 5, none, nullptr), aff::Error);
    CHECK_THROWS_AS(aff::gpu::fp8_gemv(bytes, bytes, 12, 128, none, 1, none, nullptr), aff::Error);
    aff::gpu::RouterConfig c;
    c.top_k = 17;
    CHECK_THROWS_AS(aff::gpu::router_topk(none, 1, c, none, nullptr, nullptr, nullptr, none, nullptr), aff::Error);
}
#endif
