// Device test: kernels/dense_gemv.hip (plain and indexed, BF16 and F32 weights, vector and
// element-wise row paths, batches across the chunk size), kernels/embed.hip and
// kernels/swiglu.hip against their CPU twins on fresh random data.
#include "device_test.hpp"

#include "libaff/gpu/reference/dense_gemv.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/embed.hpp"
#include "kernels/swiglu.hpp"

#include <cstring>

using namespace aff::gpu::test;
using aff::gpu::DenseType;

namespace {
// Weights of `type` as raw bytes (BF16: rounded from the normal draw).
std::vector<uint8_t> weights(DenseType type, size_t count) {
    const std::vector<float> v = normal(count, 0.0f, 0.05f);
    std::vector<uint8_t> bytes(count * (type == DenseType::bf16 ? 2 : 4));
    for (size_t i = 0; i < count; ++i) {
        if (type == DenseType::bf16) {
            const uint16_t b = aff::cpu::float_to_bf16(v[i]);
            std::memcpy(&bytes[2 * i], &b, 2);
        } else {
            std::memcpy(&bytes[4 * i], &v[i], 4);
        }
    }
    return bytes;
}
const char* name(DenseType t) { return t == DenseType::bf16 ? "bf16" : "f32"; }
}  // namespace

AFF_DEVICE_TEST("dense_gemv") {
    aff::gpu::Stream s;
    struct Shape { int n, k; };
    for (const DenseType type : {DenseType::bf16, DenseType::f32}) {
        // 4096 x 4096: the vector path at real width; 200 x 61: element-wise rows, partial block.
        for (const Shape sh : {Shape{4096, 4096}, Shape{200, 61}, Shape{129, 64}}) {
            const std::vector<uint8_t> w = weights(type, static_cast<size_t>(sh.n) * sh.k);
            aff::gpu::Buffer dw = to_device(w);
            for (const int batch : {1, 3, 4, 7}) {
                const std::vector<float> x = normal(static_cast<size_t>(batch) * sh.k);
                std::vector<float> y(static_cast<size_t>(batch) * sh.n);
                aff::cpu::dense_gemv(w.data(), type, sh.n, sh.k, x.data(), sh.k, batch, y.data(), sh.n);
                aff::gpu::Buffer dx = to_device(x), dy = poisoned(y.size());
                aff::gpu::dense_gemv(dw.data(), type, sh.n, sh.k, dx.as<float>(), sh.k, batch, dy.as<float>(), sh.n,
                                     s.handle());
                s.synchronize();
                add(rows, "dense_gemv",
                    std::string(name(type)) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) + " batch " +
                        std::to_string(batch),
                    nmse(to_host<float>(dy, y.size()), y), aff::gpu::dense_gemv_max_nmse);
            }
        }
        // Indexed: 8 experts of 96 x 128 (down: 128 x 96), 2 tokens x 3 experts each.
        for (const Shape sh : {Shape{96, 128}, Shape{128, 96}, Shape{32, 40}}) {
            const int experts = 8, tokens = 2, k_per = 3, jobs = tokens * k_per;
            const std::vector<uint8_t> w = weights(type, static_cast<size_t>(experts) * sh.n * sh.k);
            const std::vector<int32_t> ids = {5, 0, 7, 3, 5, 1};
            for (const int x_group : {k_per, 1}) {
                const std::vector<float> x = normal(static_cast<size_t>(jobs / x_group) * sh.k);
                std::vector<float> y(static_cast<size_t>(jobs) * sh.n);
                aff::cpu::dense_gemv_indexed(w.data(), type, sh.n, sh.k, ids.data(), jobs, x.data(), x_group, y.data());
                aff::gpu::Buffer dw = to_device(w), dids = to_device(ids), dx = to_device(x), dy = poisoned(y.size());
                aff::gpu::dense_gemv_indexed(dw.data(), type, sh.n, sh.k, dids.as<int32_t>(), jobs, dx.as<float>(),
                                             x_group, dy.as<float>(), s.handle());
                s.synchronize();
                add(rows, "dense_gemv",
                    std::string("indexed ") + name(type) + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k) +
                        " jobs 6 x_group " + std::to_string(x_group),
                    nmse(to_host<float>(dy, y.size()), y), aff::gpu::dense_gemv_max_nmse);
            }
        }
        // Embedding: 3 streams of 5 tokens from a 1000 x 96 table.
        {
            const int vocab = 1000, dim = 96, n = 5, copies = 3;
            const std::vector<uint8_t> table = weights(type, static_cast<size_t>(vocab) * dim);
            const std::vector<int32_t> tokens = {999, 0, 17, 17, 512};
            std::vector<float> out(static_cast<size_t>(n) * copies * dim);
            aff::cpu::embed(table.data(), type, dim, tokens.data(), n, copies, out.data());
            aff::gpu::Buffer dt = to_device(table), dtok = to_device(tokens), dout = poisoned(out.size());
            aff::gpu::embed(dt.data(), type, dim, dtok.as<int32_t>(), n, copies, dout.as<float>(), s.handle());
            s.synchronize();
            add(rows, "embed", std::string(name(type)) + " 5 tokens x 3 streams x 96",
                nmse(to_host<float>(dout, out.size()), out), aff::gpu::embed_max_nmse);
        }
    }
}

AFF_DEVICE_TEST("swiglu") {
    aff::gpu::Stream s;
    const long long count = 3 * 2048 + 5;
    const std::vector<float> g = normal(count, 0.0f, 3.0f), u = normal(count, 0.0f, 3.0f);
    for (const float limit : {1.0f, 10.0f, INFINITY}) {
        std::vector<float> out(count);
        aff::cpu::swiglu(g.data(), u.data(), count, limit, out.data());
        aff::gpu::Buffer dg = to_device(g), du = to_device(u), dout = poisoned(count);
        aff::gpu::swiglu(dg.as<float>(), du.as<float>(), count, limit, dout.as<float>(), s.handle());
        s.synchronize();
        add(rows, "swiglu", "limit " + std::to_string(limit) + " x 6149", nmse(to_host<float>(dout, count), out),
            aff::gpu::swiglu_max_nmse);
    }
    const int tokens = 3, k = 6, dim = 4096;
    const std::vector<float> routed = normal(static_cast<size_t>(tokens) * k * dim), wts = normal(tokens * k),
                             shared = normal(static_cast<size_t>(tokens) * dim);
    for (const bool with_shared : {true, false}) {
        std::vector<float> out(static_cast<size_t>(tokens) * dim);
        aff::cpu::moe_combine(routed.data(), wts.data(), tokens, k, dim, with_shared ? shared.data() : nullptr,
                              out.data());
        aff::gpu::Buffer dr = to_device(routed), dw = to_device(wts), dsh = to_device(shared), dout = poisoned(out.size());
        aff::gpu::moe_combine(dr.as<float>(), dw.as<float>(), tokens, k, dim, with_shared ? dsh.as<float>() : nullptr,
                              dout.as<float>(), s.handle());
        s.synchronize();
        add(rows, "swiglu", std::string("moe_combine 3 tokens x 6 experts x 4096") + (with_shared ? " + shared" : ""),
            nmse(to_host<float>(dout, out.size()), out), aff::gpu::swiglu_max_nmse);
    }
}
