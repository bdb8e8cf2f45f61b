// Device test: kernels/hadamard.hip against its CPU twin quant::rotate (formats/
// quant-codebook.md §5) on batches of vectors from 2 to 8192 wide (V4-Flash's expert
// inputs are 4096 and 2048), strided rows, in place; one row per case gives the NMSE, and
// one the count of elements that differ at all (the kernel is meant to match bit for bit;
// reported, bound by the NMSE row). The GPU's rotation must also undo with quant::unrotate.
#include "device_test.hpp"

#include "libaff/quant/rotation.hpp"
#include "kernels/hadamard.hpp"

#include <cstdio>

using namespace aff::gpu::test;

AFF_DEVICE_TEST("hadamard") {
    struct Case { int n, batch, ldx, ldy; bool in_place; };
    for (const Case c : {Case{4096, 5, 4096, 4096, false}, Case{2048, 17, 2048, 2048, true},
                         Case{1024, 3, 1100, 1030, false}, Case{8192, 2, 8192, 8192, false}, Case{2, 7, 2, 2, false},
                         Case{64, 64, 64, 64, true}, Case{512, 1, 512, 512, false}}) {
        const std::vector<float> x = normal(std::size_t(c.batch) * c.ldx, 0.1f, 1.5f);
        std::vector<float> want(std::size_t(c.batch) * c.ldy, 0.0f);
        for (int b = 0; b < c.batch; ++b) {
            float* row = &want[std::size_t(b) * c.ldy];
            std::copy(&x[std::size_t(b) * c.ldx], &x[std::size_t(b) * c.ldx] + c.n, row);
            aff::quant::rotate(row, std::size_t(c.n));
        }
        aff::gpu::Buffer dx = to_device(x);
        aff::gpu::Buffer dy = c.in_place ? std::move(dx) : poisoned(std::size_t(c.batch) * c.ldy);
        aff::gpu::Stream s;
        aff::gpu::hadamard_rotate(c.in_place ? dy.as<float>() : dx.as<float>(), c.ldx, dy.as<float>(), c.ldy, c.n,
                                  c.batch, s.handle());
        s.synchronize();
        std::vector<float> got = to_host<float>(dy, std::size_t(c.batch) * c.ldy), got_rows, want_rows;
        std::size_t differ = 0;
        for (int b = 0; b < c.batch; ++b)
            for (int i = 0; i < c.n; ++i) {
                const float g = got[std::size_t(b) * c.ldy + i], w = want[std::size_t(b) * c.ldy + i];
                got_rows.push_back(g);
                want_rows.push_back(w);
                differ += g != w;
            }
        const std::string what = std::to_string(c.batch) + "x" + std::to_string(c.n) +
                                 (c.in_place ? " in place" : c.ldx != c.n ? " strided" : "");
        add(rows, "hadamard", what, nmse(got_rows, want_rows), aff::gpu::hadamard_max_nmse);
        std::printf("hadamard %s: %zu of %zu elements differ from quant::rotate\n", what.c_str(), differ,
                    got_rows.size());
        // H is orthonormal: unrotate gives the input back (to fp32 rounding).
        std::vector<float> back(got_rows), orig;
        for (int b = 0; b < c.batch; ++b) {
            aff::quant::unrotate(&back[std::size_t(b) * c.n], std::size_t(c.n));
            orig.insert(orig.end(), &x[std::size_t(b) * c.ldx], &x[std::size_t(b) * c.ldx] + c.n);
        }
        add(rows, "hadamard", what + ": unrotate(gpu) = x", nmse(back, orig), 1e-12);
    }
    // A width the kernel refuses is an error, not a wrong answer.
    double refused = 1.0;
    try {
        aff::gpu::Buffer b = poisoned(96);
        aff::gpu::hadamard_rotate(b.as<float>(), 96, b.as<float>(), 96, 96, 1, nullptr);
    } catch (const std::exception&) {
        refused = 0.0;
    }
    add(rows, "hadamard", "n = 96 (not a power of two) is refused", refused, 0.0);
}
