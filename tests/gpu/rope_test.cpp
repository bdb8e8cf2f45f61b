// Device test: kernels/rope.hip against its CPU twin, with the main table (θ 10000) and the
// YaRN compress table (θ 160000, factor 16), on q heads (64 × 512), the latent kv (1 × 512)
// and indexer vectors (64 × 128), forward and inverse, positions up to 1M.
#include "device_test.hpp"

#include "libaff/gpu/reference/rope.hpp"
#include "kernels/rope.hpp"

using namespace aff::gpu::test;

AFF_DEVICE_TEST("rope") {
    const aff::RopeTable main_table = aff::rope_table({10000.0, 64, 1.0});
    const aff::RopeTable compress_table = aff::rope_table({160000.0, 64, 16.0, 65536.0, 32.0, 1.0});
    const std::vector<int32_t> positions = {0, 1, 127, 4096, 65535, 1048575};
    const int tokens = static_cast<int>(positions.size());
    struct Case { const char* what; int vecs, dim; const aff::RopeTable* table; bool inverse; };
    for (const Case c : {Case{"q main", 64, 512, &main_table, false}, Case{"q compress", 64, 512, &compress_table, false},
                         Case{"kv compress", 1, 512, &compress_table, false},
                         Case{"indexer compress", 64, 128, &compress_table, false},
                         Case{"out inverse compress", 64, 512, &compress_table, true}}) {
        const size_t count = static_cast<size_t>(tokens) * c.vecs * c.dim;
        const std::vector<float> x = normal(count);
        std::vector<float> want = x;
        aff::cpu::rope(want.data(), positions.data(), tokens, c.vecs, c.dim, *c.table, c.inverse);

        aff::gpu::Buffer dx = to_device(x), dp = to_device(positions);
        aff::gpu::Stream s;
        aff::gpu::rope(dx.as<float>(), dp.as<int32_t>(), tokens, c.vecs, c.dim, *c.table, c.inverse, s.handle());
        s.synchronize();
        const std::vector<float> got = to_host<float>(dx, count);
        add(rows, "rope", std::string(c.what) + " " + std::to_string(tokens) + "x" + std::to_string(c.vecs) + "x" +
                              std::to_string(c.dim),
            nmse(got, want), aff::gpu::rope_max_nmse);
        // The rotation must move the rotary channels (else a no-op kernel would pass).
        add(rows, "rope", std::string(c.what) + " changed the rotary part", nmse(got, x) > 1e-3 ? 0.0 : 1.0, 0.0);
    }
}
