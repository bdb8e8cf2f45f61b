// run_gpucheck (gpucheck.hpp): loads the container's CPU model, then for each chosen layer
// drives every kernel family on the layer's own weights (the stored FP8/BF16 bytes, the
// stored TQ2875 experts, the real norms, mHC, sink, ape and routing tables) with random
// activations, and compares with the CPU twin: the CPU forward's own code where it is a free
// function (attention_ops), libaff/gpu/reference otherwise, and for matrices the CPU model's
// dequantised float32 weights summed in double (an independent decoder of the same bytes),
// for routed experts the CPU model's own ContainerExpertSource (quant::matvec on the memory
// map). Last, GpuModel against Model end to end, dense FP8 kept FP8 on the GPU. Built in every build; the GPU part only with
// AFF_HAVE_GPU.
//
// Thresholds (max |gpu − cpu| / max |cpu|, the twin's output as the scale):
//   exact 0      embedding (a copy of BF16 rows).
//   1e-6         SwiGLU and the MoE combine: expf/silu against std::exp, an ulp or two.
//   1e-5         RMSNorm, hc_post, attention, compressor, indexer scores, router weights: fp32
//                sums of at most a few thousand terms in another order (the device tests
//                measured at most 2.6e-6 at these shapes, tests/gpu/RESULTS.md).
//   1e-4         every GEMV and prefill GEMM (FP8, BF16, codebook experts; the GEMMs against
//                twins that round x, and for moe_gemm the weights, to bf16 as they do), mHC
//                pre (Sinkhorn) and the fused decode site (hc_site: expand, pre, norm), the shared
//                expert and the head: fp32 partial sums of K ≤ 32768 products against double
//                sums; the reordering error is about √K·2⁻²⁴ ≈ 1e-5 of the output's rms. One
//                wrongly decoded weight moves its row by about 1/(4√K) ≥ 1.4e-3 of max |y|,
//                a wrong FP8 block scale by far more: both stay 10× above the threshold.
//   0            selections (router ids, indexer top-k) given identical scores: exact.
//   1e-3         end-to-end logits: the per-op errors above, through every layer and the head.
#include "libaff/gpu/gpucheck.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

#if defined(AFF_HAVE_GPU)
#include "libaff/model/codebook_experts.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/gpu/host_copy.hpp"
#include "libaff/gpu/kernel_cases.hpp"
#include "libaff/gpu/reference/dense_gemv.hpp"
#include "libaff/gpu/reference/gemm.hpp"
#include "libaff/gpu/reference/hc.hpp"
#include "libaff/gpu/reference/rms_norm.hpp"
#include "libaff/model/attention_ops.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/model/container_experts.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/model/router.hpp"
#include "libaff/model/weights.hpp"
#include "libaff/quant/matrix.hpp"
#include "libaff/quant/quantize_plan.hpp"
#include "libaff/quant/rotation.hpp"
#include "kernels/attention.hpp"
#include "kernels/compressor.hpp"
#include "kernels/bf16_gemv.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/embed.hpp"
#include "kernels/fp8_gemm.hpp"
#include "kernels/fp8_gemv.hpp"
#include "kernels/hc.hpp"
#include "kernels/indexer.hpp"
#include "kernels/moe_gemm.hpp"
#include "kernels/moe_gemv.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/router_topk.hpp"
#include "kernels/swiglu.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#endif

namespace aff::gpu {

bool GpuCheckReport::ok() const {
    if (rows.empty()) return false;
    for (const GpuCheckRow& r : rows)
        if (!r.pass) return false;
    return true;
}

void write_text(std::ostream& out, const GpuCheckReport& r) {
    out << "model   " << r.model << "\ndevice  " << r.device << "\n";
    if (!r.forward.empty()) out << "forward " << r.forward << "\n";
    std::size_t failed = 0;
    char line[512];
    for (const GpuCheckRow& row : r.rows) {
        std::snprintf(line, sizeof line, "%-12s %-58s %10.3e %9.1e  %s\n", row.op.c_str(), row.what.c_str(), row.error,
                      row.threshold, row.pass ? "PASS" : "FAIL");
        out << line;
        failed += !row.pass;
    }
    out << r.rows.size() << " checks, " << failed << " failed\n";
}

void write_json(std::ostream& out, const GpuCheckReport& r) {
    nlohmann::json rows = nlohmann::json::array();
    for (const GpuCheckRow& row : r.rows) {
        // JSON has no infinity: a non-finite error (NaN output) is written as null.
        const nlohmann::json error = std::isfinite(row.error) ? nlohmann::json(row.error) : nlohmann::json(nullptr);
        rows.push_back({{"op", row.op}, {"what", row.what}, {"error", error}, {"threshold", row.threshold},
                        {"pass", row.pass}});
    }
    out << nlohmann::json{{"model", r.model}, {"device", r.device}, {"forward", r.forward}, {"ok", r.ok()},
                          {"rows", rows}}
               .dump(2)
        << "\n";
}

#if defined(AFF_HAVE_GPU)
namespace {

using u64 = std::uint64_t;

// max |got − want| / max |want|; infinity for a size mismatch or a non-finite element.
double max_rel(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return INFINITY;
    double diff = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i]) || !std::isfinite(want[i])) return INFINITY;
        diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(double(want[i])));
    }
    return scale > 0.0 ? diff / scale : diff;
}

std::string shape(u64 rows, u64 cols) { return "[" + std::to_string(rows) + "x" + std::to_string(cols) + "]"; }

class Checker {
public:
    Checker(const Container& c, const TensorReader& tensors, const Model& m, const ContainerExpertSource& experts,
            const GpuCheckOptions& o, ThreadPool& pool, std::vector<GpuCheckRow>& rows)
        : c_(c), tensors_(tensors), m_(m), cfg_(m.config()), experts_(experts), o_(o), pool_(pool), rows_(rows),
          rng_(o.seed) {
        const std::span<const std::uint16_t> cb = experts.codebook().fp16_values();
        codebook_ = to_device(std::vector<std::uint16_t>(cb.begin(), cb.end()));
    }

    void add(std::string op, std::string what, double error, double threshold) {
        rows_.push_back({std::move(op), std::move(what), error, threshold, error <= threshold});
    }

    // Runs fn; an error (a kernel refusing the shape, a launch failure) becomes a failed row.
    void guarded(const std::string& op, const std::string& what, const std::function<void()>& fn) {
        try {
            fn();
        } catch (const std::exception& e) {
            rows_.push_back({op, what + ": " + e.what(), INFINITY, 0.0, false});
        }
    }

    std::vector<float> normal(std::size_t n, float sd = 1.0f) {
        std::normal_distribution<float> d(0.0f, sd);
        std::vector<float> v(n);
        for (float& x : v) x = d(rng_);
        return v;
    }
    int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

    // y [batch][rows] = W x in double, W the CPU model's float32 matrix.
    std::vector<float> cpu_gemv(const Matrix& w, const std::vector<float>& x, int batch) {
        std::vector<float> y(std::size_t(batch) * w.rows);
        pool_.parallel_for(w.rows, [&](std::size_t r0, std::size_t r1) {
            for (std::size_t r = r0; r < r1; ++r)
                for (int b = 0; b < batch; ++b) {
                    const float* xr = x.data() + std::size_t(b) * w.cols;
                    const float* wr = w.row(int(r));
                    double s = 0.0;
                    for (int k = 0; k < w.cols; ++k) s += double(wr[k]) * xr[k];
                    y[std::size_t(b) * w.rows + r] = float(s);
                }
        }, 64);
        return y;
    }

    // y = W x on the GPU from the container's stored bytes of `name` (FP8 + E8M0 scales through
    // fp8_gemv, BF16 through bf16_gemv, F32 through dense_gemv); the op name it used goes to `op`.
    std::vector<float> gpu_gemv(const std::string& name, const Matrix& w, const std::vector<float>& x, int batch,
                                std::string& op) {
        const TensorInfo& t = c_.tensor(name);
        Stream s;
        Buffer dx = to_device(x), dy = poisoned(std::size_t(batch) * w.rows);
        const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
        const TensorInfo* scale = c_.find(stem + ".scale");
        Buffer dw;
        if (t.type == StorageType::F8_E4M3 && scale && scale->type == StorageType::F8_E8M0) {
            op = "fp8_gemv";
            dw = to_device(c_.bytes(t));
            Buffer ds = to_device(c_.bytes(*scale));
            for (int b0 = 0; b0 < batch; b0 += kFp8GemvMaxBatch) {
                const int nb = std::min(kFp8GemvMaxBatch, batch - b0);
                fp8_gemv(dw.as<std::uint8_t>(), ds.as<std::uint8_t>(), w.rows, w.cols,
                         dx.as<float>() + std::size_t(b0) * w.cols, nb, dy.as<float>() + std::size_t(b0) * w.rows,
                         s.handle());
            }
            s.synchronize();
            return to_host<float>(dy, std::size_t(batch) * w.rows);
        }
        if (t.type == StorageType::BF16 && w.cols % 8 == 0) {
            op = "bf16_gemv";  // as GpuModel multiplies every BF16 matrix: 4 rows of x a launch
            dw = to_device(c_.bytes(t));
            for (int b0 = 0; b0 < batch; b0 += kBf16GemvMaxBatch)
                bf16_gemv(dw.as<std::uint16_t>(), w.rows, w.cols, dx.as<float>() + std::size_t(b0) * w.cols, w.cols,
                          std::min(kBf16GemvMaxBatch, batch - b0), dy.as<float>() + std::size_t(b0) * w.rows, w.rows,
                          s.handle());
            s.synchronize();
            return to_host<float>(dy, std::size_t(batch) * w.rows);
        }
        op = "dense_gemv";
        DenseType type = DenseType::f32;
        if (t.type == StorageType::BF16) {
            type = DenseType::bf16;
            dw = to_device(c_.bytes(t));
        } else if (t.type == StorageType::F32) {
            dw = to_device(c_.bytes(t));
        } else {  // another storage (FP8 with F32 scales, F16): the decoded values, as GpuModel does
            dw = to_device(w.w);
        }
        dense_gemv(dw.data(), type, w.rows, w.cols, dx.as<float>(), w.cols, batch, dy.as<float>(), w.rows, s.handle());
        s.synchronize();
        return to_host<float>(dy, std::size_t(batch) * w.rows);
    }

    void projection(int layer, const std::string& rel, const Matrix& w) {
        const std::string name = "layers." + std::to_string(layer) + "." + rel + ".weight";
        const std::string what = "layer " + std::to_string(layer) + " " + rel + " " + shape(w.rows, w.cols);
        guarded("gemv", what, [&] {
            const int T = o_.tokens;
            const std::vector<float> x = normal(std::size_t(T) * w.cols);
            std::string op;
            const std::vector<float> got = gpu_gemv(name, w, x, T, op);
            add(op, what, max_rel(got, cpu_gemv(w, x, T)), 1e-4);
            gemm(name, what, w, x, T);
        });
    }

    // The prefill GEMM of the same stored weights (GpuModel uses it for calls of 5+ tokens),
    // against its twin, which rounds x to bf16 as the kernel does and sums in double.
    void gemm(const std::string& name, const std::string& what, const Matrix& w, const std::vector<float>& x, int m) {
        const TensorInfo& t = c_.tensor(name);
        const TensorInfo* scale = c_.find(name.substr(0, name.size() - 7) + ".scale");
        const bool fp8 = t.type == StorageType::F8_E4M3 && scale && scale->type == StorageType::F8_E8M0;
        if (!fp8 && t.type != StorageType::BF16) return;  // GpuModel has no GEMM for other storage
        Stream s;
        Buffer dw = to_device(c_.bytes(t)), dx = to_device(x), dy = poisoned(std::size_t(m) * w.rows);
        std::vector<float> want(std::size_t(m) * w.rows);
        if (fp8) {
            Buffer ds = to_device(c_.bytes(*scale));
            fp8_gemm(dw.as<std::uint8_t>(), ds.as<std::uint8_t>(), w.rows, w.cols, dx.as<float>(), w.cols, m,
                     dy.as<float>(), w.rows, s.handle());
            cpu::fp8_gemm(c_.bytes(t).data(), c_.bytes(*scale).data(), w.rows, w.cols, x.data(), m, want.data());
        } else {
            bf16_gemm(dw.as<std::uint16_t>(), w.rows, w.cols, dx.as<float>(), w.cols, m, dy.as<float>(), w.rows,
                      s.handle());
            std::vector<float> xr(x.size());
            for (std::size_t i = 0; i < x.size(); ++i) xr[i] = cpu::bf16_to_float(cpu::float_to_bf16(x[i]));
            cpu::dense_gemv(c_.bytes(t).data(), DenseType::bf16, w.rows, w.cols, xr.data(), w.cols, m, want.data(),
                            w.rows);
        }
        s.synchronize();
        add(fp8 ? "fp8_gemm" : "bf16_gemm", what, max_rel(to_host<float>(dy, want.size()), want), 1e-4);
    }

    void embedding() {
        guarded("embed", "embed.weight", [&] {
            const TensorInfo& t = c_.tensor("embed.weight");
            const int T = o_.tokens, D = cfg_.hidden_size, n = cfg_.hc_mult, V = cfg_.vocab_size;
            std::vector<std::int32_t> tokens(T);
            for (auto& tk : tokens) tk = uniform_int(0, V - 1);
            std::vector<float> want;
            for (int i = 0; i < T; ++i)
                for (int s = 0; s < n; ++s)
                    want.insert(want.end(), m_.weights().embed.row(tokens[i]), m_.weights().embed.row(tokens[i]) + D);
            Buffer table;
            DenseType type = DenseType::bf16;
            if (t.type == StorageType::BF16) table = to_device(c_.bytes(t));
            else table = to_device(m_.weights().embed.w), type = DenseType::f32;
            Buffer dt = to_device(tokens), out = poisoned(want.size());
            Stream s;
            embed(table.data(), type, D, dt.as<std::int32_t>(), T, n, out.as<float>(), s.handle());
            s.synchronize();
            add("embed", "embed.weight " + std::to_string(T) + " tokens x " + std::to_string(n) + " streams",
                max_rel(to_host<float>(out, want.size()), want), 0.0);
        });
    }

    void norm(int layer, const std::string& what, const std::vector<float>& w) {
        guarded("rms_norm", what, [&] {
            const int T = o_.tokens, n = int(w.size());
            const std::vector<float> x = normal(std::size_t(T) * n, 3.0f);
            std::vector<float> want(x.size());
            cpu::rms_norm(x.data(), w.data(), want.data(), T, n, float(cfg_.rms_norm_eps));
            Buffer dx = to_device(x), dw = to_device(w), dy = poisoned(x.size());
            Stream s;
            rms_norm(dx.as<float>(), dw.as<float>(), dy.as<float>(), T, n, float(cfg_.rms_norm_eps), s.handle());
            s.synchronize();
            add("rms_norm", what + " [" + std::to_string(n) + "]", max_rel(to_host<float>(dy, x.size()), want), 1e-5);
        });
    }

    HcConfig hc_config() const {
        HcConfig h;
        h.dim = cfg_.hidden_size;
        h.sinkhorn_iters = cfg_.hc_sinkhorn_iters;
        h.hc_eps = float(cfg_.hc_eps);
        h.norm_eps = float(cfg_.rms_norm_eps);
        h.streams = cfg_.hc_mult;
        return h;
    }

    void hyper(int layer, const std::string& site, const HyperConnectionWeights& w, const std::vector<float>& norm_w) {
        const std::string what = "layer " + std::to_string(layer) + " hc_" + site;
        guarded("hc", what, [&] {
            const int T = o_.tokens, D = cfg_.hidden_size, n = cfg_.hc_mult, rows = cfg_.mix_width();
            const HcConfig hc = hc_config();
            const std::vector<float> x = normal(std::size_t(T) * n * D);
            std::vector<float> post(std::size_t(T) * n), comb(std::size_t(T) * n * n), u(std::size_t(T) * D);
            cpu::hc_pre(x.data(), T, {w.fn.w.data(), w.base.data(), w.scale.data()}, hc, post.data(), comb.data(),
                        u.data());
            Buffer dx = to_device(x), dfn = to_device(w.fn.w), dbase = to_device(w.base), dscale = to_device(w.scale);
            Buffer scratch = poisoned(std::size_t(T) * (rows + 1)), dpost = poisoned(post.size()),
                   dcomb = poisoned(comb.size()), du = poisoned(u.size());
            Stream s;
            hc_pre(dx.as<float>(), T, {dfn.as<float>(), dbase.as<float>(), dscale.as<float>()}, hc, scratch.as<float>(),
                   dpost.as<float>(), dcomb.as<float>(), du.as<float>(), s.handle());
            s.synchronize();
            add("hc_pre", what + " post", max_rel(to_host<float>(dpost, post.size()), post), 1e-4);
            add("hc_pre", what + " comb (Sinkhorn)", max_rel(to_host<float>(dcomb, comb.size()), comb), 1e-4);
            add("hc_pre", what + " collapsed input", max_rel(to_host<float>(du, u.size()), u), 1e-4);
            // Expand with the CPU's post and comb on both sides: the step alone.
            const std::vector<float> f = normal(std::size_t(T) * D);
            std::vector<float> want = x;
            cpu::hc_post(want.data(), f.data(), post.data(), comb.data(), T, D, n);
            Buffer df = to_device(f), dp = to_device(post), dc = to_device(comb);
            hc_post(dx.as<float>(), df.as<float>(), dp.as<float>(), dc.as<float>(), T, D, s.handle(), n);
            s.synchronize();
            add("hc_post", what, max_rel(to_host<float>(dx, x.size()), want), 1e-5);
            // The fused decode site (GpuModel at 1..4 tokens): expand with the CPU's post and
            // comb, then the pre step with these weights and the norm, against the twins in
            // that order.
            const int Ts = std::min(T, kHcSiteMaxTokens);
            if (!hc_site_takes(Ts, hc)) return;
            std::vector<float> xa(x.begin(), x.begin() + std::size_t(Ts) * n * D);
            cpu::hc_post(xa.data(), f.data(), post.data(), comb.data(), Ts, D, n);
            std::vector<float> post1(std::size_t(Ts) * n), comb1(std::size_t(Ts) * n * n), u1(std::size_t(Ts) * D),
                a1(u1.size());
            cpu::hc_pre(xa.data(), Ts, {w.fn.w.data(), w.base.data(), w.scale.data()}, hc, post1.data(), comb1.data(),
                        u1.data());
            cpu::rms_norm(u1.data(), norm_w.data(), a1.data(), Ts, D, float(cfg_.rms_norm_eps));
            Buffer sx = to_device(std::vector<float>(x.begin(), x.begin() + std::size_t(Ts) * n * D)),
                   sp = to_device(post), sc = to_device(comb), snorm = to_device(norm_w), sa = poisoned(a1.size()),
                   sscratch = poisoned(hc_site_scratch_floats(Ts, hc));
            hc_site(sx.as<float>(), df.as<float>(), sp.as<float>(), sc.as<float>(), Ts,
                    {dfn.as<float>(), dbase.as<float>(), dscale.as<float>()}, hc, snorm.as<float>(),
                    sscratch.as<float>(), sa.as<float>(), s.handle());
            s.synchronize();
            const std::string fused = what + " fused site " + std::to_string(Ts) + " tokens";
            add("hc_site", fused + ": expanded streams", max_rel(to_host<float>(sx, xa.size()), xa), 1e-5);
            add("hc_site", fused + ": post", max_rel(to_host<float>(sp, post1.size()), post1), 1e-4);
            add("hc_site", fused + ": comb (Sinkhorn)", max_rel(to_host<float>(sc, comb1.size()), comb1), 1e-4);
            add("hc_site", fused + ": normed input", max_rel(to_host<float>(sa, a1.size()), a1), 1e-4);
        });
    }

    void attention_check(int layer) {
        const AttentionKind kind = cfg_.attention[layer];
        const char* kinds[] = {"sliding", "csa", "hca"};
        const std::string what = "layer " + std::to_string(layer) + " " + kinds[int(kind)];
        guarded("attention", what, [&] {
            const int n = o_.tokens, H = cfg_.num_heads, Dh = cfg_.head_dim, W = cfg_.sliding_window;
            const std::int64_t start = 70001;  // deep in a sequence: a full ring, thousands of entries
            const AttentionInputs in = random_attention_inputs(rng_, AttendShape{n, H, Dh, W, start}, kind,
                                                               cfg_.compress_ratio[layer], cfg_.index_topk, 1.0f,
                                                               m_.weights().layers[layer].attn.sink);
            const int count = in.count;
            std::vector<float> want(std::size_t(n) * H * Dh);
            attend(pool_, in.shape, in.q.data(), in.kv.data(), in.ring.data(), in.attend_entries(), in.sink.data(),
                   want.data());
            AttentionDeviceCase dev(in);
            Buffer dout = poisoned(want.size());
            AttentionArgs& a = dev.args;
            a.out = dout.as<float>();
            Buffer scratch;
            if (n <= 4) {  // decode: the split-key path GpuModel takes
                scratch = poisoned(attention_scratch_bytes(n, H, Dh) / sizeof(float));
                a.scratch = scratch.as<float>();
            }
            Stream s;
            attention(a, s.handle());
            s.synchronize();
            add("attention", what + " " + std::to_string(H) + "x" + std::to_string(Dh) + " at " +
                                 std::to_string(start) + " (" + std::to_string(count) + " entries)",
                max_rel(to_host<float>(dout, want.size()), want), 1e-5);
        });
    }

    void compressor_check(int layer, const std::string& rel, const CompressorWeights& w) {
        const std::string what = "layer " + std::to_string(layer) + " " + rel;
        guarded("compressor", what, [&] {
            const int r = w.ratio, dim = w.dim, width = w.overlap ? 2 * dim : dim, rope_dim = cfg_.rope_dim;
            const std::vector<float> inv_freq = rope_inv_freq(cfg_.rope_compress, rope_dim);
            const CompressorParams params{r, dim, w.overlap, w.ape.w.data(), w.norm.data(), cfg_.rms_norm_eps, &inv_freq};
            const std::int64_t start = 70001;
            CompressorState st = random_compressor_state(rng_, r, dim, w.overlap, start);
            const std::vector<int> chunks = {1, o_.tokens, 2 * r + 3};
            int total = 0;
            for (int n : chunks) total += n;
            const CompressorDeviceCase dev(params, st, start, total);
            Stream s;
            std::int64_t pos = start;
            double worst = 0.0;
            for (int n : chunks) {
                const std::vector<float> kv = normal(std::size_t(n) * width), gate = normal(std::size_t(n) * width, 2.0f);
                compress_tokens(params, st, pos, n, kv.data(), gate.data());
                Buffer dkv = to_device(kv), dgate = to_device(gate);
                const CompressorArgs a = dev.args(dkv.as<float>(), dgate.as<float>(), n, pos);
                compressor(a, s.handle());
                s.synchronize();
                pos += n;
                // The entries this call emitted (the earlier ones are the same random rows on both sides).
                const std::size_t first = std::size_t((pos - n) / r) * dim, end = std::size_t(st.count) * dim;
                if (end > first) {
                    const std::vector<float> got = to_host<float>(dev.entries, end);
                    worst = std::max(worst, max_rel(std::vector<float>(got.begin() + first, got.end()),
                                                    std::vector<float>(st.entries.begin() + first, st.entries.end())));
                }
            }
            add("compressor", what + " r " + std::to_string(r) + " dim " + std::to_string(dim) + " (" +
                                  std::to_string(st.count) + " entries)",
                worst, 1e-5);
        });
    }

    void indexer_check(int layer) {
        const std::string what = "layer " + std::to_string(layer) + " indexer";
        guarded("indexer", what, [&] {
            const int n = o_.tokens, heads = cfg_.index_heads, dim = cfg_.index_head_dim, ratio = cfg_.compress_ratio[layer],
                      k = cfg_.index_topk;
            const std::int64_t start = 70001;
            const int count = int((start + n) / ratio), stride = std::max(count, 1);
            const std::vector<float> q = normal(std::size_t(n) * heads * dim), w = normal(std::size_t(n) * heads),
                                     keys = normal(std::size_t(stride) * dim);
            std::vector<float> want(std::size_t(n) * stride, 0.0f);
            index_scores(pool_, n, start, heads, dim, ratio, count, q.data(), w.data(), keys.data(), want.data(), stride);
            Buffer dq = to_device(q), dw = to_device(w), dkeys = to_device(keys),
                   dscores = to_device(std::vector<float>(want.size(), 0.0f));
            Stream s;
            indexer_scores(dq.as<float>(), dw.as<float>(), dkeys.as<float>(), dscores.as<float>(), n, heads, dim, start,
                           ratio, count, stride, s.handle());
            s.synchronize();
            const std::string geo = " " + std::to_string(heads) + "x" + std::to_string(dim) + ", " +
                                    std::to_string(count) + " keys";
            add("indexer", what + " scores" + geo, max_rel(to_host<float>(dscores, want.size()), want), 1e-5);
            // Top-k of the CPU's own scores on both sides: the selection alone, exact.
            Buffer dsc = to_device(want), dsel = poisoned(std::size_t(n) * k, 4), dcnt = poisoned(n, 4);
            indexer_topk(dsc.as<float>(), n, stride, start, ratio, count, k, dsel.as<std::int32_t>(),
                         dcnt.as<std::int32_t>(), s.handle());
            s.synchronize();
            const std::vector<std::int32_t> sel = to_host<std::int32_t>(dsel, std::size_t(n) * k),
                                            cnt = to_host<std::int32_t>(dcnt, n);
            std::vector<std::int32_t> expect(k);
            int mismatches = 0;
            for (int t = 0; t < n; ++t) {
                const int keep = select_topk(&want[std::size_t(t) * stride], visible_entries(count, start + t, ratio), k,
                                             expect.data());
                mismatches += cnt[t] != keep;
                for (int i = 0; i < k; ++i) mismatches += sel[std::size_t(t) * k + i] != (i < keep ? expect[i] : -1);
            }
            add("indexer", what + " top-" + std::to_string(k) + " mismatches" + geo, mismatches, 0.0);
        });
    }

    // The router on the layer's own gate, bias or hash table; returns the CPU's ids of token 0
    // (the experts the codebook check then multiplies with).
    std::vector<int> router(int layer) {
        std::vector<int> chosen;
        const FfnWeights& f = m_.weights().layers[layer].ffn;
        const bool hash = cfg_.hash_routed[layer];
        const std::string what = "layer " + std::to_string(layer) + (hash ? " hash (tid2eid)" : " sqrtsoftplus + bias");
        guarded("router_topk", what, [&] {
            const int T = o_.tokens, E = cfg_.n_routed_experts, k = cfg_.experts_per_token;
            const std::vector<float> x = normal(std::size_t(T) * cfg_.hidden_size);
            const std::vector<float> logits = cpu_gemv(f.gate, x, T);
            std::vector<std::int32_t> tokens(T);
            for (auto& t : tokens) t = uniform_int(0, cfg_.vocab_size - 1);
            const RouterConfig rc{E, k, float(cfg_.routed_scaling_factor)};
            std::vector<std::int32_t> ids(std::size_t(T) * k);
            std::vector<float> weights(ids.size());
            // The forward's own router (libaff/model/router.hpp); the kernel always normalises.
            route(logits.data(), T, {E, k, rc.route_scale, true}, hash ? nullptr : f.bias.data(),
                  hash ? f.tid2eid.data() : nullptr, tokens.data(), ids.data(), weights.data());
            Buffer dl = to_device(logits), db = to_device(hash ? std::vector<float>(E, 0.0f) : f.bias),
                   dt = to_device(hash ? f.tid2eid : std::vector<std::int32_t>(1, 0)), dtok = to_device(tokens),
                   dids = poisoned(ids.size(), 4), dwt = poisoned(weights.size());
            Stream s;
            router_topk(dl.as<float>(), T, rc, hash ? nullptr : db.as<float>(), hash ? dt.as<std::int32_t>() : nullptr,
                        dtok.as<std::int32_t>(), dids.as<std::int32_t>(), dwt.as<float>(), s.handle());
            s.synchronize();
            const std::vector<std::int32_t> got = to_host<std::int32_t>(dids, ids.size());
            int mismatches = 0;
            for (std::size_t i = 0; i < ids.size(); ++i) mismatches += got[i] != ids[i];
            add("router_topk", what + " ids mismatches, " + std::to_string(E) + " experts top " + std::to_string(k),
                mismatches, 0.0);
            add("router_topk", what + " weights", max_rel(to_host<float>(dwt, weights.size()), weights), 1e-5);
            chosen.assign(ids.begin(), ids.begin() + k);
        });
        return chosen;
    }

    // moe_gemv on the container's stored experts against the CPU model's decoder of the same
    // bytes (quant::matvec), one launch per matrix kind with a job per expert.
    void codebook_experts(int layer, const std::vector<int>& chosen) {
        const std::string what = "layer " + std::to_string(layer) + " experts";
        guarded("moe_gemv", what, [&] {
            if (chosen.empty()) throw_internal("the router check chose no experts");
            const int B = std::min(o_.tokens, kMoeGemvMaxBatch), D = cfg_.hidden_size, I = cfg_.moe_intermediate_size;
            std::string ids;
            for (int e : chosen) ids += (ids.empty() ? "" : ",") + std::to_string(e);
            for (ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w2, ExpertMatrix::w3}) {
                const int n = which == ExpertMatrix::w2 ? D : I, k = which == ExpertMatrix::w2 ? I : D;
                const std::vector<float> x = normal(std::size_t(B) * k);
                std::vector<float> want(chosen.size() * B * n), got;
                std::vector<Buffer> w, xs, ys;
                std::vector<MoeGemvJob> jobs;
                bool rotated = false;
                for (std::size_t j = 0; j < chosen.size(); ++j) {
                    for (int b = 0; b < B; ++b)
                        experts_.matvec(layer, chosen[j], which, x.data() + std::size_t(b) * k,
                                        want.data() + (j * B + b) * n);
                    rotated = experts_.codebook_matrix(layer, chosen[j], which).rotated;
                    std::vector<float> xin = x;  // TQ2875R: the kernel takes H x (the caller rotates)
                    if (rotated)
                        for (int b = 0; b < B; ++b) quant::rotate(xin.data() + std::size_t(b) * k, k);
                    const std::uint8_t* bytes = experts_.codebook_matrix(layer, chosen[j], which).bytes;
                    w.push_back(to_device(std::span<const std::uint8_t>(bytes, quant::matrix_bytes(n, k))));
                    xs.push_back(to_device(xin));
                    ys.push_back(poisoned(std::size_t(B) * n));
                    jobs.push_back({w.back().as<std::uint8_t>(), xs.back().as<float>(), ys.back().as<float>()});
                }
                Stream s;
                moe_gemv(jobs.data(), int(jobs.size()), n, k, B, codebook_.as<std::uint16_t>(), s.handle());
                s.synchronize();
                for (const Buffer& y : ys) {
                    const std::vector<float> part = to_host<float>(y, std::size_t(B) * n);
                    got.insert(got.end(), part.begin(), part.end());
                }
                const char* names[] = {"w1", "w2", "w3"};
                add("moe_gemv", what + " " + ids + " " + names[int(which)] + " " + shape(n, k) +
                                    (rotated ? " TQ2875R" : " TQ2875"),
                    max_rel(got, want), 1e-4);
                if (!rotated) moe_gemm_check(layer, chosen, which, n, k, what + " " + ids + " " + names[int(which)]);
            }
        });
    }

    // The prefill path: the chosen experts' bytes as a small stack, every token routed to every
    // one of them (jobs t·E' + e), grouped on the device (moe_group), multiplied by moe_gemm;
    // against its twin (weights and x rounded to bf16 as the kernel does, sums in double).
    void moe_gemm_check(int layer, const std::vector<int>& chosen, ExpertMatrix which, int n, int k,
                        const std::string& what) {
        const int T = o_.tokens, E = int(chosen.size()), jobs = T * E;
        if (!moe_gemm_takes(n, k, E)) return;
        const std::size_t bytes = quant::matrix_bytes(n, k);
        std::vector<std::uint8_t> stack(bytes * E);
        for (int e = 0; e < E; ++e)
            std::memcpy(stack.data() + bytes * e, experts_.codebook_matrix(layer, chosen[e], which).bytes, bytes);
        const std::vector<float> x = normal(std::size_t(T) * k);
        std::vector<std::int32_t> ids(jobs);
        for (int j = 0; j < jobs; ++j) ids[j] = j % E;
        std::vector<float> want(std::size_t(jobs) * n), part(std::size_t(T) * n);
        for (int e = 0; e < E; ++e) {
            cpu::moe_gemm(stack.data() + bytes * e, n, k, experts_.codebook(), x.data(), T, part.data());
            for (int t = 0; t < T; ++t)
                std::copy(part.begin() + std::size_t(t) * n, part.begin() + std::size_t(t + 1) * n,
                          want.begin() + (std::size_t(t) * E + e) * n);
        }
        Buffer dstack = to_device(stack), dids = to_device(ids), dx = to_device(x), dy = poisoned(want.size()),
               scratch(moe_group_bytes(jobs, E)), table = expert_table(dstack.data(), bytes, E);
        Stream s;
        moe_group(dids.as<std::int32_t>(), jobs, E, scratch.data(), s.handle());
        moe_gemm(table.as<const std::uint8_t*>(), 0, n, k, scratch.data(), jobs, E, dx.as<float>(), E, dy.as<float>(),
                 codebook_.as<std::uint16_t>(), s.handle());
        s.synchronize();
        add("moe_gemm", what + " " + std::to_string(T) + " tokens", max_rel(to_host<float>(dy, want.size()), want),
            1e-4);
    }

    void shared_expert(int layer) {
        const FfnWeights& f = m_.weights().layers[layer].ffn;
        if (!f.has_shared) return;
        const std::string what = "layer " + std::to_string(layer) + " shared expert (w1, w3, SwiGLU, w2)";
        guarded("shared", what, [&] {
            const int T = o_.tokens, I = cfg_.moe_intermediate_size;
            const float limit = cfg_.swiglu_limit > 0 ? float(cfg_.swiglu_limit) : INFINITY;
            const std::vector<float> x = normal(std::size_t(T) * cfg_.hidden_size);
            const std::string p = "layers." + std::to_string(layer) + ".ffn.shared_experts.";
            std::string op;
            const std::vector<float> g1 = gpu_gemv(p + "w1.weight", f.shared_w1, x, T, op),
                                     g3 = gpu_gemv(p + "w3.weight", f.shared_w3, x, T, op);
            Buffer dg = to_device(g1), du = to_device(g3), dh = poisoned(g1.size());
            Stream s;
            swiglu(dg.as<float>(), du.as<float>(), (long long)g1.size(), limit, dh.as<float>(), s.handle());
            s.synchronize();
            const std::vector<float> got = gpu_gemv(p + "w2.weight", f.shared_w2, to_host<float>(dh, g1.size()), T, op);
            const std::vector<float> c1 = cpu_gemv(f.shared_w1, x, T), c3 = cpu_gemv(f.shared_w3, x, T);
            std::vector<float> h(c1.size());
            cpu::swiglu(c1.data(), c3.data(), (long long)c1.size(), limit, h.data());
            add("shared", what + " " + std::to_string(T) + "x" + std::to_string(I), max_rel(got, cpu_gemv(f.shared_w2, h, T)),
                1e-4);
        });
    }

    void swiglu_check() {
        guarded("swiglu", "SwiGLU and MoE combine", [&] {
            const int T = o_.tokens, I = cfg_.moe_intermediate_size, D = cfg_.hidden_size, k = cfg_.experts_per_token;
            const float limit = cfg_.swiglu_limit > 0 ? float(cfg_.swiglu_limit) : INFINITY;
            // Spread 6: many pre-activations beyond the clamp, so both branches are checked.
            const std::vector<float> g = normal(std::size_t(T) * k * I, 6.0f), u = normal(g.size(), 6.0f);
            std::vector<float> want(g.size());
            cpu::swiglu(g.data(), u.data(), (long long)g.size(), limit, want.data());
            Buffer dg = to_device(g), du = to_device(u), dh = poisoned(g.size());
            Stream s;
            swiglu(dg.as<float>(), du.as<float>(), (long long)g.size(), limit, dh.as<float>(), s.handle());
            s.synchronize();
            add("swiglu", std::to_string(T * k) + "x" + std::to_string(I) + " limit " + std::to_string(int(limit)),
                max_rel(to_host<float>(dh, g.size()), want), 1e-6);
            const std::vector<float> routed = normal(std::size_t(T) * k * D), weights = normal(std::size_t(T) * k),
                                     shared = normal(std::size_t(T) * D);
            std::vector<float> out(std::size_t(T) * D);
            cpu::moe_combine(routed.data(), weights.data(), T, k, D, shared.data(), out.data());
            Buffer dr = to_device(routed), dw = to_device(weights), ds = to_device(shared), dout = poisoned(out.size());
            moe_combine(dr.as<float>(), dw.as<float>(), T, k, D, ds.as<float>(), dout.as<float>(), s.handle());
            s.synchronize();
            add("moe_combine", std::to_string(T) + " tokens x " + std::to_string(k) + " experts + shared",
                max_rel(to_host<float>(dout, out.size()), out), 1e-6);
        });
    }

    void head() {
        guarded("head", "hyper head, norm, head.weight", [&] {
            const ModelWeights& w = m_.weights();
            const int T = o_.tokens, D = cfg_.hidden_size, n = cfg_.hc_mult, V = cfg_.vocab_size;
            const HcConfig hc = hc_config();
            const std::vector<float> x = normal(std::size_t(T) * n * D);
            std::vector<float> y(std::size_t(T) * D), yn(y.size());
            cpu::hc_head(x.data(), T, {w.hc_head.fn.w.data(), w.hc_head.base.data(), w.hc_head.scale.data()}, hc,
                         y.data());
            cpu::rms_norm(y.data(), w.norm.data(), yn.data(), T, D, float(cfg_.rms_norm_eps));
            const std::vector<float> want = cpu_gemv(w.head, yn, T);
            Buffer dx = to_device(x), dfn = to_device(w.hc_head.fn.w), dbase = to_device(w.hc_head.base),
                   dscale = to_device(w.hc_head.scale), scratch = poisoned(std::size_t(T) * (n + 1)),
                   dy = poisoned(y.size()), dnorm = to_device(w.norm);
            Stream s;
            hc_head(dx.as<float>(), T, {dfn.as<float>(), dbase.as<float>(), dscale.as<float>()}, hc,
                    scratch.as<float>(), dy.as<float>(), s.handle());
            rms_norm(dy.as<float>(), dnorm.as<float>(), dy.as<float>(), T, D, float(cfg_.rms_norm_eps), s.handle());
            s.synchronize();
            add("hc_head", "hyper head + final norm [" + std::to_string(D) + "]", max_rel(to_host<float>(dy, y.size()), yn),
                1e-4);
            std::string op;
            const std::vector<float> got = gpu_gemv("head.weight", w.head, to_host<float>(dy, y.size()), T, op);
            add(op, "head.weight " + shape(V, D) + " after the GPU head", max_rel(got, want), 1e-4);
            // The fused head site (decode): expand of the last sub-block (random post and comb),
            // hyper head, final norm.
            const int Ts = std::min(T, kHcSiteMaxTokens);
            if (!hc_site_takes(Ts, hc)) return;
            const std::vector<float> f = normal(std::size_t(Ts) * D), comb = normal(std::size_t(Ts) * n * n, 0.5f);
            std::vector<float> post = normal(std::size_t(Ts) * n, 0.5f);
            for (float& p : post) p += 1.0f;
            std::vector<float> xa(x.begin(), x.begin() + std::size_t(Ts) * n * D), ys(std::size_t(Ts) * D), ysn(ys.size());
            cpu::hc_post(xa.data(), f.data(), post.data(), comb.data(), Ts, D, n);
            cpu::hc_head(xa.data(), Ts, {w.hc_head.fn.w.data(), w.hc_head.base.data(), w.hc_head.scale.data()}, hc,
                         ys.data());
            cpu::rms_norm(ys.data(), w.norm.data(), ysn.data(), Ts, D, float(cfg_.rms_norm_eps));
            Buffer sx = to_device(std::vector<float>(x.begin(), x.begin() + std::size_t(Ts) * n * D)), sf = to_device(f),
                   sp = to_device(post), sc = to_device(comb), sy = poisoned(ysn.size()),
                   sscratch = poisoned(hc_site_scratch_floats(Ts, hc));
            hc_head_site(sx.as<float>(), sf.as<float>(), sp.as<float>(), sc.as<float>(), Ts,
                         {dfn.as<float>(), dbase.as<float>(), dscale.as<float>()}, hc, dnorm.as<float>(),
                         sscratch.as<float>(), sy.as<float>(), s.handle());
            s.synchronize();
            add("hc_site", "fused head site (expand, hyper head, final norm) " + std::to_string(Ts) + " tokens",
                max_rel(to_host<float>(sy, ysn.size()), ysn), 1e-4);
        });
    }

    void layer(int l) {
        const LayerWeights& w = m_.weights().layers[l];
        const std::string p = "layer " + std::to_string(l) + " ";
        norm(l, p + "attn_norm", w.attn_norm);
        norm(l, p + "ffn_norm", w.ffn_norm);
        norm(l, p + "q_norm", w.attn.q_norm);
        norm(l, p + "kv_norm", w.attn.kv_norm);
        hyper(l, "attn", w.hc_attn, w.attn_norm);
        hyper(l, "ffn", w.hc_ffn, w.ffn_norm);
        projection(l, "attn.wq_a", w.attn.wq_a);
        projection(l, "attn.wq_b", w.attn.wq_b);
        projection(l, "attn.wkv", w.attn.wkv);
        projection(l, "attn.wo_a", w.attn.wo_a);
        projection(l, "attn.wo_b", w.attn.wo_b);
        attention_check(l);
        if (w.attn.has_compressor) {
            projection(l, "attn.compressor.wkv", w.attn.compressor.wkv);
            projection(l, "attn.compressor.wgate", w.attn.compressor.wgate);
            compressor_check(l, "compressor", w.attn.compressor);
        }
        if (w.attn.has_indexer) {
            projection(l, "attn.indexer.wq_b", w.attn.index_wq_b);
            projection(l, "attn.indexer.weights_proj", w.attn.index_weights);
            projection(l, "attn.indexer.compressor.wkv", w.attn.index_compressor.wkv);
            projection(l, "attn.indexer.compressor.wgate", w.attn.index_compressor.wgate);
            compressor_check(l, "indexer compressor", w.attn.index_compressor);
            indexer_check(l);
        }
        projection(l, "ffn.gate", w.ffn.gate);
        const std::vector<int> chosen = router(l);
        codebook_experts(l, chosen);
        if (w.ffn.has_shared) {
            projection(l, "ffn.shared_experts.w1", w.ffn.shared_w1);
            projection(l, "ffn.shared_experts.w3", w.ffn.shared_w3);
            projection(l, "ffn.shared_experts.w2", w.ffn.shared_w2);
            shared_expert(l);
        }
    }

    // GpuModel against Model: a random prompt of `tokens` as one prefill (every position's
    // logits, GpuModel::forward), then greedy decode steps through GpuModel::decode (the
    // graph-replayed path aff-run takes) feeding back the CPU's argmax.
    std::string end_to_end() {
        std::string described;
        guarded("forward", "GpuModel vs Model", [&] {
            GpuOptions go;
            go.device = o_.device;
            go.max_context = 4096;  // the state for the prompt and the decode steps, not a million positions
            // The prefill GEMMs round activations to bf16, which moves logits by about 1e-2 and can
            // flip routing; they are checked op by op above, so the end-to-end run takes the exact
            // GEMV path at any prompt length and keeps the tight bound.
            go.gemm_min_tokens = 0;
            GpuModel gpu(m_, &tensors_, go);  // the container's FP8 bytes: dense FP8 stays FP8
            described = gpu.describe();
            const int V = cfg_.vocab_size, T = o_.tokens;
            std::vector<std::int32_t> prompt(T);
            for (auto& t : prompt) t = uniform_int(0, V - 1);
            DecodeState cs = m_.new_state();
            GpuDecodeState gs = gpu.new_state();
            std::vector<float> want = m_.forward(cs, prompt, true), got = gpu.forward(gs, prompt, true);
            std::vector<float> all_want = want, all_got = got;
            auto argmax = [V](const float* v) { return int(std::max_element(v, v + V) - v); };
            for (int step = 0; step < o_.decode_steps; ++step) {
                const std::int32_t next[1] = {argmax(&want[want.size() - V])};
                want = m_.forward(cs, next, false);
                GpuDecodeState* one[1] = {&gs};
                got = gpu.decode(one, next);  // the decode path (captured graphs)
                all_want.insert(all_want.end(), want.begin(), want.end());
                all_got.insert(all_got.end(), got.begin(), got.end());
            }
            const double rel = max_rel(all_got, all_want);
            // Argmax agreement where the CPU's top two are further apart than the two sides'
            // largest difference (closer pairs may swap legitimately).
            double max_abs = 0.0, scale = 0.0;
            for (std::size_t i = 0; i < all_want.size() && all_got.size() == all_want.size(); ++i) {
                max_abs = std::max(max_abs, std::fabs(double(all_got[i]) - all_want[i]));
                scale = std::max(scale, std::fabs(double(all_want[i])));
            }
            int mismatches = all_got.size() == all_want.size() ? 0 : 1, decided = 0;
            const int positions = int(all_want.size() / V);
            for (int p = 0; p < positions && all_got.size() == all_want.size(); ++p) {
                const float* wr = &all_want[std::size_t(p) * V];
                std::vector<float> sorted(wr, wr + V);
                std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<float>());
                if (double(sorted[0]) - sorted[1] <= 2 * max_abs) continue;
                ++decided;
                mismatches += argmax(wr) != argmax(&all_got[std::size_t(p) * V]);
            }
            const std::string what = "prefill " + std::to_string(T) + " + decode " + std::to_string(o_.decode_steps);
            add("forward", what + " logits (max |logit| " + std::to_string(scale).substr(0, 6) + ")", rel, 1e-3);
            add("forward", what + " argmax mismatches (" + std::to_string(decided) + " of " +
                               std::to_string(positions) + " positions decided)",
                mismatches, 0.0);
        });
        return described;
    }

    // The same container tiered (GpuTierOptions::slab_cap, as --gpu-expert-mib would: a slab
    // of a quarter of the experts, the rest in the pinned host pool, demand admitting every
    // miss so that the mover moves between calls) against the all-resident run (default
    // options: every expert in the arena where the model fits): the same prompt and decode
    // steps, logits bit-identical (same kernels reading the same bytes; expert_tiers.hpp).
    void tiered() {
        guarded("tiers", "tiered vs all-resident", [&] {
            GpuOptions go;
            go.device = o_.device;
            go.max_context = 4096;
            const int V = cfg_.vocab_size, T = o_.tokens;
            std::vector<std::int32_t> prompt(T), steps;
            for (auto& t : prompt) t = uniform_int(0, V - 1);
            auto sequence = [&](GpuModel& gpu, bool choose) {
                GpuDecodeState gs = gpu.new_state();
                std::vector<float> all = gpu.forward(gs, prompt, false);
                for (int step = 0; step < o_.decode_steps; ++step) {
                    const float* last = &all[all.size() - V];
                    if (choose) steps.push_back(int(std::max_element(last, last + V) - last));
                    const std::int32_t next[1] = {steps[std::size_t(step)]};
                    GpuDecodeState* one[1] = {&gs};
                    const std::vector<float> got = gpu.decode(one, next);
                    all.insert(all.end(), got.begin(), got.end());
                }
                return all;
            };
            std::vector<float> want;
            std::size_t slot = 0;
            std::string reference;
            {
                GpuModel gpu(m_, &tensors_, go);
                want = sequence(gpu, true);
                slot = (gpu.expert_extent(0, 0).bytes + 255) / 256 * 256;
                reference = gpu.tiers().tiered ? "already tiered: the model does not fit" : "all resident";
            }
            const std::int64_t experts = std::int64_t(cfg_.num_layers) * cfg_.n_routed_experts;
            const std::int64_t slots = std::max<std::int64_t>(1, experts / 4);
            go.tiers.slab_cap = std::size_t(slots) * slot;
            go.tiers.strategy = "demand";
            GpuModel gpu(m_, &tensors_, go);
            const std::vector<float> got = sequence(gpu, false);
            const GpuTierReport r = gpu.tiers();
            long long differing = got.size() == want.size() ? 0 : 1;
            for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
                differing += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
            const std::string what = std::to_string(r.plan.gpu_slots) + " of " + std::to_string(experts) +
                                     " experts in the slab, " + std::to_string(r.plan.host_slots) + " in the pool, demand; " +
                                     "prefill " + std::to_string(T) + " + decode " + std::to_string(o_.decode_steps) +
                                     " against the " + reference + " run";
            add("tiers", what + ": logits differing bit for bit", double(differing), 0.0);
            add("tiers", what + ": experts left on the SSD", double(r.plan.ssd_experts), 0.0);
            add("tiers", what + ": the mover moved nothing (1 = none; " + std::to_string(r.moves) + " moves)",
                r.moves > 0 || slots >= experts ? 0.0 : 1.0, 0.0);
        });
    }

private:
    const Container& c_;
    const TensorReader& tensors_;
    const Model& m_;
    const ModelConfig& cfg_;
    const ContainerExpertSource& experts_;
    const GpuCheckOptions& o_;
    ThreadPool& pool_;
    std::vector<GpuCheckRow>& rows_;
    std::mt19937_64 rng_;
    Buffer codebook_;
};

}  // namespace
#endif

GpuCheckReport run_gpucheck(const std::string& path, const GpuCheckOptions& o, ThreadPool& pool, Progress& progress) {
    if (o.tokens < 1 || o.tokens > 64) throw_usage("--tokens " + std::to_string(o.tokens) + " is out of range [1, 64]");
    if (o.decode_steps < 0) throw_usage("--decode-steps must not be negative");
    if (std::filesystem::is_directory(path))
        throw_usage(path + " is a directory: aff-gpucheck checks an .aff container (aff-quantize writes one)");
    auto container = std::make_shared<const Container>(Container::open(path));
    if (!container->config()) throw_format("metadata has no config (the model's config.json)", path);
#if !defined(AFF_HAVE_GPU)
    (void)pool;
    (void)progress;
    throw_unsupported("this build of aff has no GPU support (configured with AFF_GPU=OFF): nothing to check");
#else
    if (device_count() == 0)
        throw Error(ErrorKind::device, "no GPU is visible (check the driver and CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES)");
    const ModelConfig config = with_context("metadata config", [&] { return parse_model_config(*container->config(), path); });
    std::vector<int> layers = o.layers;
    for (int l : layers)
        if (l < 0 || l >= config.num_layers)
            throw_usage("--layer " + std::to_string(l) + " is out of range: the model has " +
                        std::to_string(config.num_layers) + " layers");
    if (layers.empty()) {  // the first layer of each attention kind, and the first learned-routing layer
        std::vector<bool> seen(3, false);
        for (int l = 0; l < config.num_layers; ++l)
            if (!seen[int(config.attention[l])]) seen[int(config.attention[l])] = true, layers.push_back(l);
        for (int l = 0; l < config.num_layers; ++l)
            if (!config.hash_routed[l]) {
                if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
                break;
            }
        std::sort(layers.begin(), layers.end());
    }

    GpuCheckReport report;
    report.model = path;
    use_device(o.device);
    const DeviceInfo info = device_info(o.device);
    report.device = info.name + " (sm_" + std::to_string(info.compute_major) + std::to_string(info.compute_minor) + ")";

    ContainerTensorReader tensors(container);
    if (!tensors.codebook()) throw_format("the container has no codebook section (CBOK)", path);
    auto experts = std::make_shared<const ContainerExpertSource>(container, tensors.codebook(), config,
                                                                 mtp_layers_present(tensors, config));
    for (int l = 0; l < config.num_layers; ++l)  // moe_gemv takes codebook-quantised experts only
        for (int e = 0; e < config.n_routed_experts; ++e)
            for (int which = 0; which < 3; ++which)
                if (!experts->codebook_matrix(l, e, static_cast<ExpertMatrix>(which)).bytes)
                    throw_unsupported("tensor " + quant::expert_matrix_name({false, std::uint32_t(l), std::uint32_t(e)}, which) +
                                          ": not codebook-quantised; aff-gpucheck checks containers whose routed "
                                          "experts are TQ2875 or TQ2875R (aff-quantize writes them)",
                                      path);
    ModelWeights weights = load_model_weights(tensors, config, experts);
    const Model model(config, std::move(weights), pool);

    Checker check(*container, tensors, model, *experts, o, pool, report.rows);
    progress.begin("checking ops", layers.size() + 3 + (o.end_to_end ? 1 : 0) + (o.tiered ? 1 : 0), "steps");
    check.embedding();
    progress.advance(1);
    check.swiglu_check();
    progress.advance(1);
    for (int l : layers) {
        check.layer(l);
        progress.advance(1);
    }
    check.head();
    progress.advance(1);
    if (o.end_to_end) {
        report.forward = check.end_to_end();
        progress.advance(1);
    }
    if (o.tiered) {
        check.tiered();
        progress.advance(1);
    }
    progress.end();
    return report;
#endif
}

}  // namespace aff::gpu
