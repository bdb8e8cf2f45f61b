// Device test: kernels/fp8_gemv.hip in every tuning (8 or 4 rows per group, plain or
// dependent launch, hardware or portable FP8 decoder) against the CPU twin at V4-Flash
// projection shapes, batch 1–4, random FP8 bytes (NaN codes excluded) and E8M0 block scales;
// a chain of two dependent launches where the second reads what the first wrote; and the
// strided, grouped layout (fp8_gemv_layout) the forward's wo_a uses; several matrices in one
// launch (fp8_gemv_multi) bit for bit against each alone, and against the twin.
#include "device_test.hpp"

#include "libaff/gpu/reference/fp8_gemv.hpp"
#include "kernels/fp8_gemv.hpp"

#include <algorithm>

using namespace aff::gpu::test;

AFF_DEVICE_TEST("fp8_gemv") {
    struct Shape { const char* name; int n, k; };
    for (const Shape sh : {Shape{"wq_a", 1024, 4096}, Shape{"wkv", 512, 4096}, Shape{"shared w2", 4096, 2048},
                           Shape{"wo_b", 4096, 8192}, Shape{"wq_b", 32768, 1024}, Shape{"odd rows", 136, 256}}) {
        std::vector<uint8_t> w(static_cast<size_t>(sh.n) * sh.k);
        std::uniform_int_distribution<int> byte(0, 255);
        for (uint8_t& b : w) {
            b = static_cast<uint8_t>(byte(rng()));
            if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes in a checkpoint
        }
        std::vector<uint8_t> scales(static_cast<size_t>((sh.n + 127) / 128) * (sh.k / 128));
        std::uniform_int_distribution<int> exponent(112, 130);
        for (uint8_t& s : scales) s = static_cast<uint8_t>(exponent(rng()));
        aff::gpu::Buffer dw = to_device(w), ds = to_device(scales);
        for (int batch = 1; batch <= aff::gpu::kFp8GemvMaxBatch; ++batch) {
            if (sh.n == 32768 && batch == 2) continue;  // the largest shape at 1, 3 and 4 keeps the CPU side short
            const std::vector<float> x = normal(static_cast<size_t>(batch) * sh.k);
            std::vector<float> want(static_cast<size_t>(batch) * sh.n);
            aff::cpu::fp8_gemv(w.data(), scales.data(), sh.n, sh.k, x.data(), batch, want.data());
            aff::gpu::Buffer dx = to_device(x);
            const std::string shape = std::string(sh.name) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                                      " batch " + std::to_string(batch);
            const aff::gpu::Fp8GemvTuning tunings[] = {{8, false, false}, {8, true, false}, {4, false, false},
                                                       {4, true, false}, {8, false, true}};
            for (const aff::gpu::Fp8GemvTuning& t : tunings) {
                aff::gpu::Buffer dy = poisoned(want.size());
                aff::gpu::Stream s;
                aff::gpu::fp8_gemv_tuned(dw.as<uint8_t>(), ds.as<uint8_t>(), sh.n, sh.k, dx.as<float>(), batch,
                                         dy.as<float>(), t, s.handle());
                s.synchronize();
                const std::string tuning = " rows " + std::to_string(t.rows_per_group) +
                                           (t.dependent_launch ? " dep" : "") + (t.portable_decode ? " portable" : "");
                add(rows, "fp8_gemv", shape + tuning, nmse(to_host<float>(dy, want.size()), want),
                    aff::gpu::fp8_gemv_max_nmse);
            }
        }
    }
}

AFF_DEVICE_TEST("fp8_gemv chain") {
    // y1 = W1 x (1024 → 4096), y2 = W2 y1 (4096 → 2048), both launched dependent on one stream,
    // y1 poisoned first: the second launch must wait for the first before reading y1.
    const int k1 = 1024, n1 = 4096, n2 = 2048, batch = 4;
    auto random_fp8 = [](size_t count) {
        std::vector<uint8_t> v(count);
        std::uniform_int_distribution<int> byte(0, 255);
        for (uint8_t& b : v) {
            b = static_cast<uint8_t>(byte(rng()));
            if ((b & 0x7f) == 0x7f) b ^= 1;
        }
        return v;
    };
    const std::vector<uint8_t> w1 = random_fp8(static_cast<size_t>(n1) * k1), w2 = random_fp8(static_cast<size_t>(n2) * n1);
    const std::vector<uint8_t> s1((n1 / 128) * (k1 / 128), 120), s2((n2 / 128) * (n1 / 128), 118);
    const std::vector<float> x = normal(static_cast<size_t>(batch) * k1);
    std::vector<float> y1(static_cast<size_t>(batch) * n1), want(static_cast<size_t>(batch) * n2);
    aff::cpu::fp8_gemv(w1.data(), s1.data(), n1, k1, x.data(), batch, y1.data());
    aff::cpu::fp8_gemv(w2.data(), s2.data(), n2, n1, y1.data(), batch, want.data());
    aff::gpu::Buffer dw1 = to_device(w1), dw2 = to_device(w2), ds1 = to_device(s1), ds2 = to_device(s2),
                     dx = to_device(x);
    for (const int rows_per_group : {8, 4}) {
        aff::gpu::Buffer dy1 = poisoned(y1.size()), dy2 = poisoned(want.size());
        aff::gpu::Stream s;
        const aff::gpu::Fp8GemvTuning t{rows_per_group, true, false};
        for (int rep = 0; rep < 20; ++rep) {  // repeated: a missing wait shows up as a race
            s.fill(dy1.data(), 0xff, y1.size() * sizeof(float));
            aff::gpu::fp8_gemv_tuned(dw1.as<uint8_t>(), ds1.as<uint8_t>(), n1, k1, dx.as<float>(), batch, dy1.as<float>(),
                                     t, s.handle());
            aff::gpu::fp8_gemv_tuned(dw2.as<uint8_t>(), ds2.as<uint8_t>(), n2, n1, dy1.as<float>(), batch,
                                     dy2.as<float>(), t, s.handle());
        }
        s.synchronize();
        add(rows, "fp8_gemv", "dependent chain 1024→4096→2048 batch 4 rows " + std::to_string(rows_per_group),
            nmse(to_host<float>(dy2, want.size()), want), aff::gpu::fp8_gemv_max_nmse);
    }
}

AFF_DEVICE_TEST("fp8_gemv layout") {
    // The forward's grouped wo_a in one launch: G groups of Ro rows, token rows ldx apart in x,
    // group g reading x at g·group_in, outputs ldy apart; against the twin per group and token.
    struct Case { int groups, group_rows, group_in, batch, pad; };
    for (const Case cs : {Case{8, 1024, 4096, 1, 0}, Case{8, 256, 1024, 4, 0}, Case{2, 64, 256, 3, 8}, Case{1, 136, 512, 2, 12}}) {
        const int n = cs.groups * cs.group_rows, k = cs.group_in;
        const int ldx = cs.groups * cs.group_in + cs.pad, ldy = n + cs.pad;
        std::vector<uint8_t> w(static_cast<size_t>(n) * k);
        std::uniform_int_distribution<int> byte(0, 255);
        for (uint8_t& b : w) {
            b = static_cast<uint8_t>(byte(rng()));
            if ((b & 0x7f) == 0x7f) b ^= 1;
        }
        std::vector<uint8_t> scales(static_cast<size_t>((n + 127) / 128) * (k / 128));
        std::uniform_int_distribution<int> exponent(112, 130);
        for (uint8_t& s : scales) s = static_cast<uint8_t>(exponent(rng()));
        const std::vector<float> x = normal(static_cast<size_t>(cs.batch) * ldx);
        // Twin: each (token, group) as its own product over the group's rows and input slice.
        std::vector<float> want(static_cast<size_t>(cs.batch) * ldy, 0.0f), part(cs.group_rows);
        std::vector<uint8_t> wg(static_cast<size_t>(cs.group_rows) * k), sg;
        for (int g = 0; g < cs.groups; ++g) {
            std::copy(w.begin() + static_cast<size_t>(g) * cs.group_rows * k,
                      w.begin() + static_cast<size_t>(g + 1) * cs.group_rows * k, wg.begin());
            sg.clear();
            for (int r = 0; r < cs.group_rows; r += 128) {  // the scale rows the twin reads for local rows
                const int row = g * cs.group_rows + r;
                sg.insert(sg.end(), scales.begin() + static_cast<size_t>(row / 128) * (k / 128),
                          scales.begin() + static_cast<size_t>(row / 128 + 1) * (k / 128));
            }
            for (int b = 0; b < cs.batch; ++b) {
                aff::cpu::fp8_gemv(wg.data(), sg.data(), cs.group_rows, k,
                                   x.data() + static_cast<size_t>(b) * ldx + static_cast<size_t>(g) * cs.group_in, 1,
                                   part.data());
                std::copy(part.begin(), part.end(), want.begin() + static_cast<size_t>(b) * ldy + g * cs.group_rows);
            }
        }
        aff::gpu::Buffer dw = to_device(w), ds = to_device(scales), dx = to_device(x);
        aff::gpu::Fp8GemvLayout layout;
        layout.ldx = ldx;
        layout.ldy = ldy;
        layout.group_rows = cs.group_rows;
        layout.x_group_stride = cs.group_in;
        for (const int rows_per_group : {8, 4}) {
            aff::gpu::Buffer dy(want.size() * sizeof(float));
            aff::gpu::Stream s;
            s.fill(dy.data(), 0, want.size() * sizeof(float));  // padding must stay 0; a missed row fails as 0
            aff::gpu::fp8_gemv_layout(dw.as<uint8_t>(), ds.as<uint8_t>(), n, k, dx.as<float>(), cs.batch, dy.as<float>(),
                                      layout, aff::gpu::Fp8GemvTuning{rows_per_group, true, false}, s.handle());
            s.synchronize();
            add(rows, "fp8_gemv",
                "layout " + std::to_string(cs.groups) + " groups of " + std::to_string(cs.group_rows) + "x" +
                    std::to_string(k) + " batch " + std::to_string(cs.batch) + " pad " + std::to_string(cs.pad) +
                    " rows " + std::to_string(rows_per_group),
                nmse(to_host<float>(dy, want.size()), want), aff::gpu::fp8_gemv_max_nmse);
        }
    }
}

AFF_DEVICE_TEST("fp8_gemv multi") {
    // The forward's wq_a + wkv (k 4096, a row group a block) and small parts at k 256 (8 row
    // groups a block, parts ending mid-block): one fp8_gemv_multi launch against each part
    // alone through fp8_gemv_tuned into the same strided layout (every float equal, padding
    // untouched), and against the CPU twin.
    struct Case { int k, n[3], count, pad; };
    for (const Case cs : {Case{4096, {1024, 512, 0}, 2, 0}, Case{4096, {2048, 2048, 0}, 2, 4},
                          Case{256, {136, 64, 8}, 3, 12}}) {
        const int k = cs.k, ldx = k + cs.pad;
        std::uniform_int_distribution<int> byte(0, 255), exponent(112, 130);
        std::vector<std::vector<uint8_t>> w(cs.count), scales(cs.count);
        std::vector<aff::gpu::Buffer> dw, ds;
        for (int i = 0; i < cs.count; ++i) {
            w[i].resize(static_cast<size_t>(cs.n[i]) * k);
            for (uint8_t& b : w[i]) {
                b = static_cast<uint8_t>(byte(rng()));
                if ((b & 0x7f) == 0x7f) b ^= 1;
            }
            scales[i].resize(static_cast<size_t>((cs.n[i] + 127) / 128) * (k / 128));
            for (uint8_t& sc : scales[i]) sc = static_cast<uint8_t>(exponent(rng()));
            dw.push_back(to_device(w[i]));
            ds.push_back(to_device(scales[i]));
        }
        for (int batch = 1; batch <= aff::gpu::kFp8GemvMaxBatch; ++batch) {
            const std::vector<float> x = normal(static_cast<size_t>(batch) * ldx);
            std::vector<float> xd(static_cast<size_t>(batch) * k);  // dense copy for the twin
            for (int b = 0; b < batch; ++b)
                std::copy(x.begin() + static_cast<size_t>(b) * ldx, x.begin() + static_cast<size_t>(b) * ldx + k,
                          xd.begin() + static_cast<size_t>(b) * k);
            aff::gpu::Buffer dx = to_device(x);
            std::vector<std::vector<float>> want(cs.count);
            for (int i = 0; i < cs.count; ++i) {
                want[i].resize(static_cast<size_t>(batch) * cs.n[i]);
                aff::cpu::fp8_gemv(w[i].data(), scales[i].data(), cs.n[i], k, xd.data(), batch, want[i].data());
            }
            for (const aff::gpu::Fp8GemvTuning t : {aff::gpu::Fp8GemvTuning{8, true, false}, aff::gpu::Fp8GemvTuning{4, true, false},
                                                    aff::gpu::Fp8GemvTuning{8, false, false}, aff::gpu::Fp8GemvTuning{8, false, true}}) {
                aff::gpu::Stream s;
                std::vector<aff::gpu::Buffer> together, alone;
                aff::gpu::Fp8GemvPart parts[3];
                aff::gpu::Fp8GemvLayout layout;
                layout.ldx = ldx;
                for (int i = 0; i < cs.count; ++i) {
                    const size_t count = static_cast<size_t>(batch) * (cs.n[i] + cs.pad);
                    together.emplace_back(count * sizeof(float));
                    alone.emplace_back(count * sizeof(float));
                    s.fill(together.back().data(), 0, count * sizeof(float));
                    s.fill(alone.back().data(), 0, count * sizeof(float));
                    parts[i] = {dw[i].as<uint8_t>(), ds[i].as<uint8_t>(), cs.n[i], together.back().as<float>(),
                                cs.n[i] + cs.pad};
                    layout.ldy = cs.n[i] + cs.pad;
                    aff::gpu::fp8_gemv_layout(dw[i].as<uint8_t>(), ds[i].as<uint8_t>(), cs.n[i], k, dx.as<float>(), batch,
                                              alone.back().as<float>(), layout, t, s.handle());
                }
                aff::gpu::fp8_gemv_multi(parts, cs.count, k, dx.as<float>(), ldx, batch, t, s.handle());
                s.synchronize();
                double differ = 0.0, worst = 0.0;
                for (int i = 0; i < cs.count; ++i) {
                    const int ldy = cs.n[i] + cs.pad;
                    const std::vector<float> got = to_host<float>(together[i], static_cast<size_t>(batch) * ldy);
                    const std::vector<float> one = to_host<float>(alone[i], static_cast<size_t>(batch) * ldy);
                    for (size_t j = 0; j < got.size(); ++j)
                        if (!(got[j] == one[j])) differ += 1.0;  // NaN counts too
                    std::vector<float> dense(want[i].size());
                    for (int b = 0; b < batch; ++b)
                        std::copy(got.begin() + static_cast<size_t>(b) * ldy, got.begin() + static_cast<size_t>(b) * ldy + cs.n[i],
                                  dense.begin() + static_cast<size_t>(b) * cs.n[i]);
                    worst = std::max(worst, nmse(dense, want[i]));
                }
                std::string what = "multi " + std::to_string(cs.count) + " parts (";
                for (int i = 0; i < cs.count; ++i) what += (i ? "+" : "") + std::to_string(cs.n[i]);
                what += ")x" + std::to_string(k) + " batch " + std::to_string(batch) + " pad " + std::to_string(cs.pad) +
                        " rows " + std::to_string(t.rows_per_group) + (t.dependent_launch ? " dep" : "") +
                        (t.portable_decode ? " portable" : "");
                add(rows, "fp8_gemv", what + " values differing from alone", differ, 0.0);
                add(rows, "fp8_gemv", what + " nmse", worst, aff::gpu::fp8_gemv_max_nmse);
            }
        }
    }
}
