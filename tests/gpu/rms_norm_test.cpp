// Device test: kernels/rms_norm.hip against its CPU twin, weighted (hidden size) and
// unweighted per head (q heads), out of place and in place; and rms_norm_rope bit for bit
// against rms_norm then rope (the forward's q heads and latent kv, forward and inverse tables).
#include "device_test.hpp"

#include "libaff/gpu/reference/rms_norm.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"

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

AFF_DEVICE_TEST("rms_norm rope") {
    const aff::RopeTable main_table = aff::rope_table({10000.0, 64, 1.0});
    const aff::RopeTable compress_table = aff::rope_table({160000.0, 64, 16.0, 65536.0, 32.0, 1.0});
    const aff::RopeTable small_table = aff::rope_table({10000.0, 16, 1.0});
    const std::vector<int32_t> positions = {0, 1, 127, 65535, 1048575};
    const int tokens = static_cast<int>(positions.size());
    struct Case { const char* what; int vecs, n; bool weighted, in_place, inverse; const aff::RopeTable* table; };
    for (const Case c : {Case{"q heads", 64, 512, false, true, false, &main_table},
                         Case{"kv", 1, 512, true, true, false, &compress_table},
                         Case{"kv out of place inverse", 1, 512, true, false, true, &compress_table},
                         Case{"tiny heads", 4, 64, false, false, false, &small_table}}) {
        const size_t count = static_cast<size_t>(tokens) * c.vecs * c.n;
        const std::vector<float> x = normal(count, 0.3f, 2.0f);
        const std::vector<float> w = normal(c.n, 1.0f, 0.2f);
        aff::gpu::Buffer dx = to_device(x), dx2 = to_device(x), dw = to_device(w), dp = to_device(positions);
        aff::gpu::Buffer want = poisoned(count);
        aff::gpu::Buffer dy = c.in_place ? std::move(dx2) : poisoned(count);
        const float* weight = c.weighted ? dw.as<float>() : nullptr;
        aff::gpu::Stream s;
        aff::gpu::rms_norm(dx.as<float>(), weight, want.as<float>(), tokens * c.vecs, c.n, 1e-6f, s.handle());
        aff::gpu::rope(want.as<float>(), dp.as<int32_t>(), tokens, c.vecs, c.n, *c.table, c.inverse, s.handle());
        aff::gpu::rms_norm_rope(c.in_place ? dy.as<float>() : dx.as<float>(), weight, dy.as<float>(), tokens, c.vecs, c.n,
                                1e-6f, dp.as<int32_t>(), *c.table, c.inverse, s.handle());
        s.synchronize();
        const std::vector<float> got = to_host<float>(dy, count), ref = to_host<float>(want, count);
        double differ = 0.0;
        for (size_t i = 0; i < count; ++i)
            if (!(got[i] == ref[i])) differ += 1.0;  // NaN counts too
        add(rows, "rms_norm", std::string("rope fused, ") + c.what + " " + std::to_string(tokens) + "x" +
                                  std::to_string(c.vecs) + "x" + std::to_string(c.n) + " values differing from two launches",
            differ, 0.0);
        // And the pair is right at all: the norm against its twin on the channels RoPE leaves alone.
        std::vector<float> normed(count);
        aff::cpu::rms_norm(x.data(), c.weighted ? w.data() : nullptr, normed.data(), tokens * c.vecs, c.n, 1e-6f);
        std::vector<float> got_plain, want_plain;
        for (size_t r = 0; r < static_cast<size_t>(tokens) * c.vecs; ++r)
            for (int i = 0; i < c.n - 2 * c.table->pairs; ++i) {
                got_plain.push_back(got[r * c.n + i]);
                want_plain.push_back(normed[r * c.n + i]);
            }
        add(rows, "rms_norm", std::string("rope fused, ") + c.what + " unrotated channels against the twin",
            nmse(got_plain, want_plain), aff::gpu::rms_norm_max_nmse);
    }
}
