// Device test: kernels/hc.hip (mHC pre with Sinkhorn, expand, hyper head) against the CPU
// twin at the V4-Flash width (D = 4096, 4 streams) for 1 and 4 tokens, and at the tiny test
// models' stream counts (2 and 3 streams, D = 64); the fused decode sites (hc_site,
// hc_head_site) against the twins composed as the forward composed the kernels before
// (hc_post, then hc_pre or hc_head, then rms_norm), for 1..4 tokens, with and without the
// expand, and twice on the same inputs (the fixed summation order gives the same bits).
#include "device_test.hpp"

#include "libaff/gpu/reference/hc.hpp"
#include "libaff/gpu/reference/rms_norm.hpp"
#include "kernels/hc.hpp"

#include <cstring>

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

// The fused sites at `streams` × `dim` for 1..4 tokens.
void check_sites(std::vector<Row>& rows, int streams, int dim) {
    aff::gpu::HcConfig c;
    c.streams = streams;
    c.dim = dim;
    const int mix_rows = aff::gpu::hc_mix_rows(streams), width = streams * dim;
    const float eps = c.norm_eps;
    const std::vector<float> fn = normal(static_cast<size_t>(mix_rows) * width, 0.0f, 0.02f);
    const std::vector<float> base = normal(mix_rows, 0.0f, 0.5f);
    const std::vector<float> scale = {0.8f, 1.1f, 1.7f};
    const std::vector<float> hfn = normal(static_cast<size_t>(streams) * width, 0.0f, 0.02f);
    const std::vector<float> hbase = normal(streams, 0.0f, 0.5f);
    const std::vector<float> hscale = {0.9f};
    const std::vector<float> norm_w = normal(dim, 1.0f, 0.2f);
    aff::gpu::Buffer dfn = to_device(fn), dbase = to_device(base), dscale = to_device(scale), dhfn = to_device(hfn),
                     dhbase = to_device(hbase), dhscale = to_device(hscale), dnorm = to_device(norm_w);
    aff::gpu::Stream s;
    for (int tokens = 1; tokens <= aff::gpu::kHcSiteMaxTokens; ++tokens) {
        const std::string shape = std::to_string(tokens) + "x" + std::to_string(streams) + "x" + std::to_string(dim);
        const size_t xs = static_cast<size_t>(tokens) * width;
        const std::vector<float> x = normal(xs, 0.0f, 1.5f);
        const std::vector<float> f = normal(static_cast<size_t>(tokens) * dim);
        // post/comb of a previous pre step (the CPU's), for the expand.
        std::vector<float> post0(tokens * streams), comb0(tokens * streams * streams), u0(static_cast<size_t>(tokens) * dim);
        aff::cpu::hc_pre(x.data(), tokens, {fn.data(), base.data(), scale.data()}, c, post0.data(), comb0.data(),
                         u0.data());
        for (const bool expand : {true, false}) {
            std::vector<float> xa = x;
            if (expand) aff::cpu::hc_post(xa.data(), f.data(), post0.data(), comb0.data(), tokens, dim, streams);
            std::vector<float> post(post0.size()), comb(comb0.size()), u(u0.size()), a(u0.size());
            aff::cpu::hc_pre(xa.data(), tokens, {fn.data(), base.data(), scale.data()}, c, post.data(), comb.data(),
                             u.data());
            aff::cpu::rms_norm(u.data(), norm_w.data(), a.data(), tokens, dim, eps);
            std::vector<float> bits[2];
            for (int run = 0; run < 2; ++run) {
                aff::gpu::Buffer dx = to_device(x), df = to_device(f), dpost = to_device(post0), dcomb = to_device(comb0);
                aff::gpu::Buffer da = poisoned(a.size()), dscratch = poisoned(aff::gpu::hc_site_scratch_floats(tokens, c));
                aff::gpu::hc_site(dx.as<float>(), expand ? df.as<float>() : nullptr, dpost.as<float>(), dcomb.as<float>(),
                                  tokens, {dfn.as<float>(), dbase.as<float>(), dscale.as<float>()}, c, dnorm.as<float>(),
                                  dscratch.as<float>(), da.as<float>(), s.handle());
                s.synchronize();
                bits[run] = to_host<float>(da, a.size());
                if (run == 1) continue;
                const std::string what = std::string(expand ? "site (expand, pre, norm) " : "site (pre, norm) ") + shape;
                add(rows, "hc", what + ": streams", nmse(to_host<float>(dx, xs), xa), aff::gpu::hc_max_nmse);
                add(rows, "hc", what + ": post", nmse(to_host<float>(dpost, post.size()), post), aff::gpu::hc_max_nmse);
                add(rows, "hc", what + ": comb", nmse(to_host<float>(dcomb, comb.size()), comb), aff::gpu::hc_max_nmse);
                add(rows, "hc", what + ": normed input", nmse(bits[0], a), aff::gpu::hc_max_nmse);
            }
            add(rows, "hc", std::string("site ") + shape + (expand ? " (expand)" : "") + ": two runs bit for bit",
                std::memcmp(bits[0].data(), bits[1].data(), bits[0].size() * 4) == 0 ? 0.0 : INFINITY, 0.0);

            // Head site on the same inputs: expand, hyper head, final norm.
            std::vector<float> y(u0.size()), yn(u0.size());
            aff::cpu::hc_head(xa.data(), tokens, {hfn.data(), hbase.data(), hscale.data()}, c, y.data());
            aff::cpu::rms_norm(y.data(), norm_w.data(), yn.data(), tokens, dim, eps);
            aff::gpu::Buffer dx = to_device(x), df = to_device(f), dpost = to_device(post0), dcomb = to_device(comb0);
            aff::gpu::Buffer dy = poisoned(yn.size()), dscratch = poisoned(aff::gpu::hc_site_scratch_floats(tokens, c));
            aff::gpu::hc_head_site(dx.as<float>(), expand ? df.as<float>() : nullptr, dpost.as<float>(),
                                   dcomb.as<float>(), tokens, {dhfn.as<float>(), dhbase.as<float>(), dhscale.as<float>()},
                                   c, dnorm.as<float>(), dscratch.as<float>(), dy.as<float>(), s.handle());
            s.synchronize();
            add(rows, "hc", std::string(expand ? "head site (expand, head, norm) " : "head site (head, norm) ") + shape,
                nmse(to_host<float>(dy, yn.size()), yn), aff::gpu::hc_max_nmse);
        }
    }
}
}  // namespace

AFF_DEVICE_TEST("hc") {
    check_geometry(rows, 4, 4096);
    check_geometry(rows, 3, 64);
    check_geometry(rows, 2, 64);
    check_sites(rows, 4, 4096);
    check_sites(rows, 3, 64);
    check_sites(rows, 2, 72);  // 72: the last block of lanes is partly past the row
    check_sites(rows, 1, 64);
}
