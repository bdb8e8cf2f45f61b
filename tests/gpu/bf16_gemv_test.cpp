// Device test: kernels/bf16_gemv.hip against the CPU twin of dense_gemv (BF16 weights) on
// fresh random data: the head's width and the forward's BF16 linear shapes, every batch 1..4,
// every rows-per-group and unroll choice, rows that do not fill the last group, strided x and
// y rows (the forward passes row strides), and k below one chunk per thread.
#include "device_test.hpp"

#include "libaff/core/error.hpp"
#include "libaff/gpu/reference/dense_gemv.hpp"
#include "kernels/bf16_gemv.hpp"

#include <cstring>

using namespace aff::gpu::test;
using aff::gpu::DenseType;

namespace {
std::vector<uint16_t> bf16_weights(size_t count) {
    const std::vector<float> v = normal(count, 0.0f, 0.05f);
    std::vector<uint16_t> w(count);
    for (size_t i = 0; i < count; ++i) w[i] = aff::cpu::float_to_bf16(v[i]);
    return w;
}
}  // namespace

AFF_DEVICE_TEST("bf16_gemv") {
    aff::gpu::Stream s;
    struct Shape { int n, k; };
    struct Tune { int rows, unroll; };
    // 4096 x 4096 and 256 x 4096 (router), 64 x 4096 (indexer weights), 1024 x 4096
    // (compressor), 1000 x 512 (n not a multiple of 8, 64 chunks a row: two groups a block),
    // 37 x 128 (16 chunks: fewer than a warp, n odd).
    for (const Shape sh : {Shape{4096, 4096}, Shape{256, 4096}, Shape{64, 4096}, Shape{1024, 4096}, Shape{1000, 512},
                           Shape{37, 128}}) {
        const std::vector<uint16_t> w = bf16_weights(static_cast<size_t>(sh.n) * sh.k);
        aff::gpu::Buffer dw = to_device(w);
        for (const int batch : {1, 2, 3, 4}) {
            // x rows 8 floats wider than k, y rows 3 wider than n: the strides are honoured.
            const int ldx = sh.k + 8, ldy = sh.n + 3;
            const std::vector<float> x = normal(static_cast<size_t>(batch) * ldx);
            std::vector<float> want(static_cast<size_t>(batch) * ldy, 0.0f);
            aff::cpu::dense_gemv(w.data(), DenseType::bf16, sh.n, sh.k, x.data(), ldx, batch, want.data(), ldy);
            aff::gpu::Buffer dx = to_device(x);
            for (const Tune t : {Tune{0, 0}, Tune{1, 1}, Tune{2, 2}, Tune{4, 1}, Tune{4, 2}, Tune{8, 1}, Tune{8, 2}}) {
                aff::gpu::Buffer dy = poisoned(want.size());
                aff::gpu::Bf16GemvTuning tuning;
                tuning.rows_per_group = t.rows;
                tuning.unroll = t.unroll;
                aff::gpu::bf16_gemv(dw.as<uint16_t>(), sh.n, sh.k, dx.as<float>(), ldx, batch, dy.as<float>(), ldy,
                                    s.handle(), tuning);
                s.synchronize();
                // Compare the written elements; the gaps between y rows must stay poisoned.
                std::vector<float> got = to_host<float>(dy, want.size()), g, v;
                bool gaps_untouched = true;
                for (int b = 0; b < batch; ++b)
                    for (int r = 0; r < ldy; ++r) {
                        const size_t i = static_cast<size_t>(b) * ldy + r;
                        if (r < sh.n) {
                            g.push_back(got[i]);
                            v.push_back(want[i]);
                        } else if (!std::isnan(got[i])) {
                            gaps_untouched = false;
                        }
                    }
                add(rows, "bf16_gemv",
                    std::to_string(sh.n) + "x" + std::to_string(sh.k) + " batch " + std::to_string(batch) +
                        " rows " + std::to_string(t.rows) + " unroll " + std::to_string(t.unroll) +
                        (gaps_untouched ? "" : " (wrote between rows)"),
                    gaps_untouched ? nmse(g, v) : INFINITY, aff::gpu::bf16_gemv_max_nmse);
            }
        }
    }
    // What the kernel refuses, it refuses: k not a multiple of 8, batch 5, unaligned x.
    {
        const std::vector<uint16_t> w = bf16_weights(64 * 64);
        aff::gpu::Buffer dw = to_device(w), dx = poisoned(8 * 64), dy = poisoned(8 * 64);
        int refused = 0;
        auto attempt = [&](int k, int batch, const float* x) {
            try {
                aff::gpu::bf16_gemv(dw.as<uint16_t>(), 64, k, x, 64, batch, dy.as<float>(), 64, s.handle());
            } catch (const aff::Error&) {
                ++refused;
            }
        };
        attempt(60, 1, dx.as<float>());
        attempt(64, 5, dx.as<float>());
        attempt(64, 1, dx.as<float>() + 1);
        add(rows, "bf16_gemv", "refuses k % 8, batch 5, unaligned x (3 of 3)", refused == 3 ? 0.0 : INFINITY, 0.0);
    }
}
