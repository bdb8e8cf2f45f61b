// Device test: kernels/rms_norm.hip against its CPU twin, weighted (hidden size) and
// unweighted per head (q heads), out of place and in place.
#include "device_test.hpp"

#include "aff/gpu/reference/rms_norm.hpp"
#include "kernels/rms_norm.hpp"

using namespace aff::gpu::test;

AFF_DEVICE_TEST("rms_norm") {
    struct Case { int rows, n; bool weighted, in_place; };
    for (const Case c : {Case{4, 4096, true, false}, Case{256, 512, false, false}, Case{3, 1024, true, true},
                         Case{64, 128, false, true}}) {
        const size_t count = static_cast<size_t>(c.rows) * c.n;
        const std::vector<float> x = normal(count, 0.3f, 2.0f);
        const std::vector<float> w = normal(c.n, 1.0f, 0.2f);
        std::vector<float> want(count);
        aff::cpu::rms_norm(x.data(), c.weighted ? w.data() : nullptr, want.data(), c.rows, c.n, 1e-6f);

        aff::gpu::Buffer dx = to_device(x), dw = to_device(w);
        aff::gpu::Buffer dy = c.in_place ? std::move(dx) : poisoned(count);
        aff::gpu::Stream s;
        aff::gpu::rms_norm(c.in_place ? dy.as<float>() : dx.as<float>(), c.weighted ? dw.as<float>() : nullptr,
                           dy.as<float>(), c.rows, c.n, 1e-6f, s.handle());
        s.synchronize();
        add(rows, "rms_norm",
            std::string(c.weighted ? "weighted " : "unweighted ") + std::to_string(c.rows) + "x" + std::to_string(c.n) +
                (c.in_place ? " in place" : ""),
            nmse(to_host<float>(dy, count), want), aff::gpu::rms_norm_max_nmse);
    }
}
