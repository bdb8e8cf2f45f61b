// Device test of the prefill GEMMs. fp8_gemm (kernels/fp8_gemm.hip) at V4-Flash projection
// shapes with token counts that leave partial tiles, one token, and strided rows (a wo_a group
// reads one slice of o and writes one slice of z): against its twin (the same bf16 rounding of
// x, sums in double; bound: fp32 ordering) and against the exact FP8 product (bound: the bf16
// rounding of x). moe_gemm + moe_group (kernels/moe_gemm.hip): jobs of random tokens routed to
// random experts (one expert taking about half the jobs, so it spans several tiles; one expert
// taking none), gate/up shape (x row = job / k) and down shape (x row = job), against the twin
// per job and against the exact TQ2875 product; the experts found through an expert table whose
// entries are not in memory order, with a non-zero matrix offset.
#include "device_test.hpp"

#include "libaff/gpu/reference/dense_gemv.hpp"
#include "libaff/gpu/reference/fp8_gemv.hpp"
#include "libaff/gpu/reference/gemm.hpp"
#include "libaff/gpu/reference/moe_gemv.hpp"
#include "libaff/quant/codebook.hpp"
#include "libaff/quant/half.hpp"
#include "libaff/quant/trellis.hpp"
#include "kernels/fp8_gemm.hpp"
#include "kernels/moe_gemm.hpp"

using namespace aff::gpu::test;

namespace {

std::vector<uint8_t> random_fp8(size_t count) {
    std::vector<uint8_t> v(count);
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : v) {
        b = static_cast<uint8_t>(byte(rng()));
        if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes in a checkpoint
    }
    return v;
}

// rows × k/256 TQ2875 blocks: random index bits, random bf16 scale (one block in 8 scale 0).
std::vector<uint8_t> random_blocks(int rows, int k) {
    const size_t blocks = static_cast<size_t>(rows) * (k / aff::quant::kBlockWeights);
    std::vector<uint8_t> w(blocks * aff::quant::kBlockBytes);
    std::uniform_int_distribution<int> byte(0, 255), kind(0, 7);
    std::uniform_real_distribution<float> scale(-0.2f, 0.2f);
    for (size_t b = 0; b < blocks; ++b) {
        uint8_t* p = w.data() + b * aff::quant::kBlockBytes;
        for (int i = 0; i < aff::quant::kIndexBytes; ++i) p[i] = static_cast<uint8_t>(byte(rng()));
        const uint16_t s = kind(rng()) == 0 ? 0 : aff::quant::float_to_bf16(scale(rng()));
        p[aff::quant::kIndexBytes] = static_cast<uint8_t>(s);
        p[aff::quant::kIndexBytes + 1] = static_cast<uint8_t>(s >> 8);
    }
    return w;
}

}  // namespace

AFF_DEVICE_TEST("fp8_gemm") {
    struct Shape {
        const char* name;
        int n, k, m, x_slices, y_slices;  // x rows x_slices·k apart (slice 1 read), y rows y_slices·n apart
    };
    for (const Shape sh : {Shape{"wq_a", 1024, 4096, 130, 1, 1}, Shape{"wkv", 512, 4096, 5, 1, 1},
                           Shape{"wo_a group", 1024, 4096, 70, 2, 2}, Shape{"odd rows", 136, 256, 257, 1, 1},
                           Shape{"wq_b", 32768, 1024, 20, 1, 1}, Shape{"one token", 4096, 2048, 1, 1, 1}}) {
        const std::vector<uint8_t> w = random_fp8(static_cast<size_t>(sh.n) * sh.k);
        std::vector<uint8_t> scales(static_cast<size_t>((sh.n + 127) / 128) * (sh.k / 128));
        std::uniform_int_distribution<int> exponent(112, 130);
        for (uint8_t& s : scales) s = static_cast<uint8_t>(exponent(rng()));
        const int ldx = sh.k * sh.x_slices, ldy = sh.n * sh.y_slices;
        const std::vector<float> xfull = normal(static_cast<size_t>(sh.m) * ldx);
        std::vector<float> x(static_cast<size_t>(sh.m) * sh.k);  // the slice the kernel reads
        const int xoff = (sh.x_slices - 1) * sh.k, yoff = (sh.y_slices - 1) * sh.n;
        for (int i = 0; i < sh.m; ++i)
            std::copy_n(xfull.begin() + static_cast<size_t>(i) * ldx + xoff, sh.k, x.begin() + static_cast<size_t>(i) * sh.k);
        std::vector<float> want(static_cast<size_t>(sh.m) * sh.n), exact(want.size());
        aff::cpu::fp8_gemm(w.data(), scales.data(), sh.n, sh.k, x.data(), sh.m, want.data());
        aff::cpu::fp8_gemv(w.data(), scales.data(), sh.n, sh.k, x.data(), sh.m, exact.data());
        aff::gpu::Buffer dw = to_device(w), ds = to_device(scales), dx = to_device(xfull);
        aff::gpu::Buffer dy = poisoned(static_cast<size_t>(sh.m) * ldy);
        aff::gpu::Stream s;
        aff::gpu::fp8_gemm(dw.as<uint8_t>(), ds.as<uint8_t>(), sh.n, sh.k, dx.as<float>() + xoff, ldx, sh.m,
                           dy.as<float>() + yoff, ldy, s.handle());
        s.synchronize();
        const std::vector<float> yfull = to_host<float>(dy, static_cast<size_t>(sh.m) * ldy);
        std::vector<float> got(want.size());
        for (int i = 0; i < sh.m; ++i)
            std::copy_n(yfull.begin() + static_cast<size_t>(i) * ldy + yoff, sh.n, got.begin() + static_cast<size_t>(i) * sh.n);
        const std::string shape = std::string(sh.name) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                                  " tokens " + std::to_string(sh.m);
        add(rows, "fp8_gemm", shape + " vs twin", nmse(got, want), aff::gpu::fp8_gemm_max_nmse);
        add(rows, "fp8_gemm", shape + " vs exact fp32 x", nmse(got, exact), aff::gpu::fp8_gemm_max_nmse_vs_exact);
    }
}

AFF_DEVICE_TEST("bf16_gemm") {
    // The router gate, a CSA compressor projection, the indexer's weights_proj and a strided call.
    struct Shape {
        const char* name;
        int n, k, m, ld_extra;  // x and y rows ld_extra floats wider than k and n
    };
    for (const Shape sh : {Shape{"gate", 256, 4096, 130, 0}, Shape{"compressor wkv", 1024, 4096, 70, 0},
                           Shape{"weights_proj", 64, 4096, 37, 0}, Shape{"strided", 200, 192, 129, 12}}) {
        std::vector<uint16_t> w(static_cast<size_t>(sh.n) * sh.k);
        const std::vector<float> wf = normal(w.size(), 0.0f, 0.05f);
        for (size_t i = 0; i < w.size(); ++i) w[i] = aff::cpu::float_to_bf16(wf[i]);
        const int ldx = sh.k + sh.ld_extra, ldy = sh.n + sh.ld_extra;
        const std::vector<float> x = normal(static_cast<size_t>(sh.m) * ldx);
        std::vector<float> xr(x);
        for (float& v : xr) v = aff::cpu::bf16_to_float(aff::cpu::float_to_bf16(v));
        std::vector<float> want(static_cast<size_t>(sh.m) * ldy, 0.0f), exact(want.size(), 0.0f);
        aff::cpu::dense_gemv(w.data(), aff::gpu::DenseType::bf16, sh.n, sh.k, xr.data(), ldx, sh.m, want.data(), ldy);
        aff::cpu::dense_gemv(w.data(), aff::gpu::DenseType::bf16, sh.n, sh.k, x.data(), ldx, sh.m, exact.data(), ldy);
        aff::gpu::Buffer dw = to_device(w), dx = to_device(x), dy = poisoned(want.size());
        aff::gpu::Stream s;
        aff::gpu::bf16_gemm(dw.as<uint16_t>(), sh.n, sh.k, dx.as<float>(), ldx, sh.m, dy.as<float>(), ldy, s.handle());
        s.synchronize();
        std::vector<float> yall = to_host<float>(dy, want.size()), got, w_rows, e_rows;
        for (int i = 0; i < sh.m; ++i)
            for (int r = 0; r < sh.n; ++r) {
                const size_t at = static_cast<size_t>(i) * ldy + r;
                got.push_back(yall[at]);
                w_rows.push_back(want[at]);
                e_rows.push_back(exact[at]);
            }
        const std::string shape = std::string(sh.name) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                                  " tokens " + std::to_string(sh.m);
        add(rows, "bf16_gemm", shape + " vs twin", nmse(got, w_rows), aff::gpu::fp8_gemm_max_nmse);
        add(rows, "bf16_gemm", shape + " vs exact fp32 x", nmse(got, e_rows), aff::gpu::fp8_gemm_max_nmse_vs_exact);
    }
}

AFF_DEVICE_TEST("moe_gemm") {
    const aff::quant::Codebook& cb = aff::quant::Codebook::builtin();
    aff::gpu::Buffer dcb = to_device(std::vector<uint16_t>(cb.fp16_values().begin(), cb.fp16_values().end()));
    struct Shape {
        const char* name;
        int n, k, tokens, top_k, x_group;  // x_group: top_k (gate/up: x row = token) or 1 (down: x row = job)
    };
    constexpr int kExperts = 8;
    for (const Shape sh : {Shape{"w1/w3", 2048, 4096, 24, 2, 2}, Shape{"w2", 4096, 2048, 24, 2, 1},
                           Shape{"many jobs", 256, 1024, 150, 2, 2}, Shape{"down, many", 128, 512, 150, 2, 1}}) {
        const int jobs = sh.tokens * sh.top_k;
        // Expert 3 takes about half the jobs, expert 7 none, the rest spread; a token's slots differ.
        std::vector<int32_t> ids(static_cast<size_t>(jobs));
        std::uniform_int_distribution<int> coin(0, 1), other(0, kExperts - 2);
        for (int t = 0; t < sh.tokens; ++t)
            for (int j = 0; j < sh.top_k; ++j) {
                int e;
                bool again;
                do {
                    e = coin(rng()) ? 3 : other(rng());
                    again = false;
                    for (int i = 0; i < j; ++i) again = again || ids[static_cast<size_t>(t) * sh.top_k + i] == e;
                } while (again);
                ids[static_cast<size_t>(t) * sh.top_k + j] = e;
            }
        const size_t expert_bytes = static_cast<size_t>(sh.n) * (sh.k / 256) * aff::quant::kBlockBytes;
        std::vector<uint8_t> stack;
        for (int e = 0; e < kExperts; ++e) {
            const std::vector<uint8_t> w = random_blocks(sh.n, sh.k);
            stack.insert(stack.end(), w.begin(), w.end());
        }
        const int xrows = jobs / sh.x_group;
        const std::vector<float> x = normal(static_cast<size_t>(xrows) * sh.k);
        std::vector<float> want(static_cast<size_t>(jobs) * sh.n), exact(want.size());
        for (int j = 0; j < jobs; ++j) {
            const uint8_t* w = stack.data() + static_cast<size_t>(ids[j]) * expert_bytes;
            const float* xj = x.data() + static_cast<size_t>(j / sh.x_group) * sh.k;
            aff::cpu::moe_gemm(w, sh.n, sh.k, cb, xj, 1, want.data() + static_cast<size_t>(j) * sh.n);
            aff::cpu::moe_gemv(w, sh.n, sh.k, cb, xj, 1, exact.data() + static_cast<size_t>(j) * sh.n);
        }
        // On the device the experts lie in reverse order behind a 64-byte lead, found through
        // the table (expert e at slot kExperts-1-e) and the matrix offset 64.
        constexpr size_t kLead = 64;
        std::vector<uint8_t> reversed(kLead + stack.size(), 0);
        for (int e = 0; e < kExperts; ++e)
            std::copy_n(stack.data() + static_cast<size_t>(e) * expert_bytes, expert_bytes,
                        reversed.data() + kLead + static_cast<size_t>(kExperts - 1 - e) * expert_bytes);
        aff::gpu::Buffer dstack = to_device(reversed), dx = to_device(x), dids = to_device(ids);
        std::vector<const uint8_t*> slots(kExperts);
        for (int e = 0; e < kExperts; ++e)
            slots[e] = dstack.as<uint8_t>() + static_cast<size_t>(kExperts - 1 - e) * expert_bytes;
        aff::gpu::Buffer table = to_device(slots);
        aff::gpu::Buffer dscratch(aff::gpu::moe_group_bytes(jobs, kExperts));
        aff::gpu::Buffer dy = poisoned(want.size());
        aff::gpu::Stream s;
        aff::gpu::moe_group(dids.as<int32_t>(), jobs, kExperts, dscratch.data(), s.handle());
        aff::gpu::moe_gemm(table.as<const uint8_t*>(), kLead, sh.n, sh.k, dscratch.data(), jobs, kExperts,
                           dx.as<float>(), sh.x_group, dy.as<float>(), dcb.as<uint16_t>(), s.handle());
        s.synchronize();
        const std::vector<float> got = to_host<float>(dy, want.size());
        const std::string shape = std::string(sh.name) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                                  " jobs " + std::to_string(jobs);
        add(rows, "moe_gemm", shape + " vs twin", nmse(got, want), aff::gpu::moe_gemm_max_nmse);
        add(rows, "moe_gemm", shape + " vs exact TQ2875", nmse(got, exact), aff::gpu::moe_gemm_max_nmse_vs_exact);
    }
}
