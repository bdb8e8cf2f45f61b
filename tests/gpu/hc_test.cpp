// Device test: kernels/hc.hip (mHC pre with Sinkhorn, expand, hyper head) against the CPU
// twin at the V4-Flash width (D = 4096, 4 streams) for 1 and 4 tokens, and at the tiny test
// models' stream counts (2 and 3 streams, D = 64).
#include "device_test.hpp"

#include "aff/gpu/reference/hc.hpp"
#include "kernels/hc.hpp"

using namespace aff::gpu::test;

namespace {
void check_geometry(std::vector<Row>& rows, int streams, int dim) {
    aff::gpu::HcConfig c;  // 20 Sinkhorn iterations, eps 1e-6
    c.streams = streams;
    c.dim = dim;
    const int mix_rows = aff::gpu::hc_mix_rows(streams), width = streams * c.dim;
    for (const int tokens : {1, 4}) {
        const std::string shape =
            std::to_string(tokens) + "x" + std::to_string(streams) + "x" + std::to_string(c.dim);
        const size_t xs = static_cast<size_t>(tokens) * width;
        const std::vector<float> x = normal(xs, 0.0f, 1.5f);
        const std::vector<float> fn = normal(static_cast<size_t>(mix_rows) * width, 0.0f, 0.02f);
        const std::vector<float> base = normal(mix_rows, 0.0f, 0.5f);
        const std::vector<float> scale = {0.8f, 1.1f, 1.7f};
        const std::vector<float> f = normal(static_cast<size_t>(tokens) * c.dim);

        std::vector<float> post(tokens * streams), comb(tokens * streams * streams), u(static_cast<size_t>(tokens) * c.dim);
        aff::cpu::hc_pre(x.data(), tokens, {fn.data(), base.data(), scale.data()}, c, post.data(), comb.data(),
                         u.data());
        std::vector<float> x_after = x;
        aff::cpu::hc_post(x_after.data(), f.data(), post.data(), comb.data(), tokens, c.dim, streams);

        aff::gpu::Buffer dx = to_device(x), dfn = to_device(fn), dbase = to_device(base), dscale = to_device(scale),
                         df = to_device(f);
        aff::gpu::Buffer dscratch = poisoned(static_cast<size_t>(tokens) * (mix_rows + 1));
        aff::gpu::Buffer dpost = poisoned(post.size()), dcomb = poisoned(comb.size()), du = poisoned(u.size());
        aff::gpu::Stream s;
        aff::gpu::hc_pre(dx.as<float>(), tokens, {dfn.as<float>(), dbase.as<float>(), dscale.as<float>()}, c,
                         dscratch.as<float>(), dpost.as<float>(), dcomb.as<float>(), du.as<float>(), s.handle());
        s.synchronize();
        add(rows, "hc", "pre: post " + shape, nmse(to_host<float>(dpost, post.size()), post), aff::gpu::hc_max_nmse);
        add(rows, "hc", "pre: comb (Sinkhorn) " + shape, nmse(to_host<float>(dcomb, comb.size()), comb),
            aff::gpu::hc_max_nmse);
        add(rows, "hc", "pre: collapsed input u " + shape, nmse(to_host<float>(du, u.size()), u),
            aff::gpu::hc_max_nmse);

        // Expand from the CPU's post/comb, so this row measures hc_post alone.
        aff::gpu::Buffer dpost_cpu = to_device(post), dcomb_cpu = to_device(comb);
        aff::gpu::hc_post(dx.as<float>(), df.as<float>(), dpost_cpu.as<float>(), dcomb_cpu.as<float>(), tokens, c.dim,
                          s.handle(), streams);
        s.synchronize();
        add(rows, "hc", "post: expanded streams " + shape, nmse(to_host<float>(dx, xs), x_after), aff::gpu::hc_max_nmse);

        // Hyper head on the expanded streams.
        const std::vector<float> hfn = normal(static_cast<size_t>(streams) * width, 0.0f, 0.02f);
        const std::vector<float> hbase = normal(streams, 0.0f, 0.5f);
        const std::vector<float> hscale = {0.9f};
        std::vector<float> y(static_cast<size_t>(tokens) * c.dim);
        aff::cpu::hc_head(x_after.data(), tokens, {hfn.data(), hbase.data(), hscale.data()}, c, y.data());
        aff::gpu::Buffer dhfn = to_device(hfn), dhbase = to_device(hbase), dhscale = to_device(hscale);
        aff::gpu::Buffer dy = poisoned(y.size()), dhscratch = poisoned(static_cast<size_t>(tokens) * (streams + 1));
        aff::gpu::hc_head(dx.as<float>(), tokens, {dhfn.as<float>(), dhbase.as<float>(), dhscale.as<float>()}, c,
                          dhscratch.as<float>(), dy.as<float>(), s.handle());
        s.synchronize();
        add(rows, "hc", "head " + shape, nmse(to_host<float>(dy, y.size()), y), aff::gpu::hc_max_nmse);
    }
}
}  // namespace

AFF_DEVICE_TEST("hc") {
    check_geometry(rows, 4, 4096);
    check_geometry(rows, 3, 64);
    check_geometry(rows, 2, 64);
}
