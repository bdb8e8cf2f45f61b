// Benchmark 3: prefill at V4-Flash geometry (D 4096, 64 heads × 512, 256 experts top 6 of
// 2048, CSA ratio 4 with the 64 × 128 indexer and top 512, HCA ratio 128, window 128), for a
// 4K and a 32K prompt run as chunks of 4096 tokens, by op class, with the kernels the GPU
// forward uses for calls of 5+ tokens:
//   projections   fp8_gemm: wq_a, wq_b, wkv, wo_a (8 groups), wo_b, shared w1/w3/w2, and
//                 the CSA indexer's wq_b (the checkpoint's FP8 tensors)
//   bf16 linears  bf16_gemm (the same kernel with BF16 weights): router gate, compressor
//                 wkv/wgate, indexer compressor wkv/wgate, indexer weights_proj
//   experts       moe_group + moe_gemm (w1, w3, w2) + swiglu + moe_combine over TQ2875 stacks
//                 of 256 experts, routing uniform at random (6 distinct experts a token)
//   indexer       indexer_scores (IndexerMath::bf16_mma, the tensor cores) + indexer_topk (CSA);
//                 the fp32 scores kernel (the exact path's, the prefill path's before) is
//                 timed beside it for comparison, and scores and top-k each alone
//   attention     attention (window + selected entries / every visible HCA entry) + ring_store
// Each class is timed for one layer of each kind (sliding, CSA, HCA) at every chunk position
// (events, median of 3 after a warm-up; attention: one run after a warm-up); the prompt's time is the sum over chunks of
// 2 sliding + 21 CSA + 20 HCA layers (the real layer mix, model doc §1.3). Not timed: mHC,
// norms, RoPE, the router top-k and the compressor kernels (elementwise, per token), the
// embedding and the head. Weights are random (FP8 bytes without NaN codes, E8M0 scales near
// 2^-7, TQ2875 blocks of random index bits and bf16 scales), activations uniform in [-1, 1).
// FLOPs counted: 2·m·n·k for every product, 4·heads·head_dim per (query, key) pair of
// attention, 2·heads·head_dim per (query, entry) of the indexer. Bound: the H200's dense bf16
// tensor peak, 989 TFLOP/s (spec sheet; the GEMMs run bf16 mma). Last three lines: the 32K
// prompt's figure, bound and ratio.
#include "kernels/check.hpp"
#include "libaff/gpu/device.hpp"
#include "gpu_bench.hpp"
#include "kernels/attention.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/fp8_gemm.hpp"
#include "kernels/indexer.hpp"
#include "kernels/moe_gemm.hpp"
#include "kernels/swiglu.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace aff::gpu;
using namespace aff::gpu::bench;

constexpr int D = 4096, H = 64, Dh = 512, Rq = 1024, G = 8, Ro = 1024, W = 128, I = 2048, E = 256, K = 6;
constexpr int Hi = 64, Di = 128, Ki = 512, kChunk = 4096;
constexpr double kPeak = 989e12;  // H200 dense bf16 tensor FLOP/s (spec)

__device__ inline uint32_t hash(size_t i, uint32_t seed) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85ebca6bu;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    h *= 0x297a2d39u;
    h ^= h >> 15;
    return h;
}

// mode 0: floats uniform in [-1, 1); 1: FP8 bytes without NaN codes; 2: E8M0 bytes 118..121;
// 3: TQ2875 blocks (random index bytes, bf16 scale ±[0.004, 0.02) in bytes 90-91);
// 4: bf16 weights uniform in ±1/64.
__global__ void fill_kernel(void* p, size_t n, uint32_t seed, int mode) {
    const size_t i = static_cast<size_t>(blockIdx.x) * 256 + threadIdx.x;
    if (i >= n) return;
    const uint32_t h = hash(i, seed);
    if (mode == 0) {
        static_cast<float*>(p)[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    } else if (mode == 1) {
        uint8_t b = static_cast<uint8_t>(h >> 24);
        if ((b & 0x7f) == 0x7f) b ^= 1;
        static_cast<uint8_t*>(p)[i] = b;
    } else if (mode == 2) {
        static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(118 + (h >> 30));
    } else if (mode == 3) {
        const size_t at = i % 92;
        uint8_t b = static_cast<uint8_t>(h >> 24);
        if (at >= 90) {  // bf16 scale: sign, exponent 119..121 (0.004 .. 0.03), random mantissa
            const uint32_t bf = ((h & 1u) << 15) | ((119u + (h >> 30) % 3u) << 7) | ((h >> 8) & 0x7fu);
            b = static_cast<uint8_t>(at == 90 ? bf & 0xffu : bf >> 8);
        }
        static_cast<uint8_t*>(p)[i] = b;
    } else {
        const float f = (static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f) / 64.0f;
        static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(__float_as_uint(f) >> 16);
    }
}

uint32_t g_seed = 1;
Buffer filled(size_t count, size_t elem, int mode) {
    Buffer b(std::max<size_t>(count * elem, 256));
    fill_kernel<<<dim3(static_cast<unsigned>((count + 255) / 256)), dim3(256)>>>(b.data(), count, g_seed++ * 0x9e37u, mode);
    AFF_GPU_CHECK(hipGetLastError());
    return b;
}

struct Fp8 {
    Buffer w, s;
    int n = 0, k = 0;
};
Fp8 fp8_matrix(int n, int k) {
    Fp8 m;
    m.n = n;
    m.k = k;
    m.w = filled(static_cast<size_t>(n) * k, 1, 1);
    m.s = filled(static_cast<size_t>((n + 127) / 128) * (k / 128), 1, 2);
    return m;
}
struct Bf16 {
    Buffer w;
    int n = 0, k = 0;
};
Bf16 bf16_matrix(int n, int k) { return {filled(static_cast<size_t>(n) * k, 2, 4), n, k}; }

// Median ms of `fn` on stream s (a warm-up, then `reps` timed runs).
double time_ms(const Stream& s, const std::function<void()>& fn, int reps = 3) {
    fn();
    s.synchronize();
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
        Event a, b;
        a.record(s);
        fn();
        b.record(s);
        b.synchronize();
        ms.push_back(b.ms_since(a));
    }
    return median(ms);
}

struct Cost {
    double ms = 0.0, flops = 0.0;
    Cost& operator+=(const Cost& o) {
        ms += o.ms;
        flops += o.flops;
        return *this;
    }
    Cost operator*(double f) const { return {ms * f, flops * f}; }
};

enum Kind { kSliding = 0, kCsa = 1, kHca = 2 };
const char* const kKindName[] = {"sliding", "CSA", "HCA"};
const char* const kClassName[] = {"projections (fp8_gemm)", "bf16 linears (bf16_gemm)", "experts (moe_gemm)",
                                  "indexer", "attention"};
constexpr int kClasses = 5;

}  // namespace

int main() {
    try {
        const std::vector<int> devices = select_devices(1);
        use_device(devices[0]);
        const DeviceInfo info = device_info(devices[0]);
        std::printf("device: %s, %d multiprocessors\n", info.name.c_str(), info.multiprocessors);
        Stream s;
        void* hs = s.handle();
        const int M = kChunk;

        // One layer's weights, shared by every kind (the kinds differ in which they use).
        Fp8 wq_a = fp8_matrix(Rq, D), wq_b = fp8_matrix(H * Dh, Rq), wkv = fp8_matrix(Dh, D),
            wo_a = fp8_matrix(G * Ro, H * Dh / G), wo_b = fp8_matrix(D, G * Ro), sh1 = fp8_matrix(I, D),
            sh3 = fp8_matrix(I, D), sh2 = fp8_matrix(D, I), iwq_b = fp8_matrix(Hi * Di, Rq);
        Bf16 gate = bf16_matrix(E, D), ckv_csa = bf16_matrix(2 * Dh, D), cg_csa = bf16_matrix(2 * Dh, D),
             ikv = bf16_matrix(2 * Di, D), ig = bf16_matrix(2 * Di, D), iw = bf16_matrix(Hi, D),
             ckv_hca = bf16_matrix(Dh, D), cg_hca = bf16_matrix(Dh, D);
        const size_t w13_bytes = static_cast<size_t>(I) * (D / 256) * 92, w2_bytes = static_cast<size_t>(D) * (I / 256) * 92;
        Buffer ex1 = filled(w13_bytes * E, 1, 3), ex3 = filled(w13_bytes * E, 1, 3), ex2 = filled(w2_bytes * E, 1, 3);
        // Expert tables (moe_gemm finds expert e at table[e]): the stacks' experts in order.
        auto table_of = [&](const Buffer& stack, size_t bytes) {
            std::vector<const uint8_t*> slots(E);
            for (int e = 0; e < E; ++e) slots[e] = stack.as<uint8_t>() + size_t(e) * bytes;
            Buffer t(slots.size() * sizeof(slots[0]));
            upload(t, slots.data(), t.size());
            return t;
        };
        const Buffer t1 = table_of(ex1, w13_bytes), t3 = table_of(ex3, w13_bytes), t2 = table_of(ex2, w2_bytes);
        std::vector<uint16_t> cb_host(4096 * 2);
        {
            std::mt19937 r(7);
            std::normal_distribution<float> nd(0.0f, 1.0f);
            for (uint16_t& v : cb_host) {  // fp16 of N(0,1): sign, exponent and 10 mantissa bits
                const float f = nd(r);
                uint32_t u;
                std::memcpy(&u, &f, 4);
                const int e = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
                v = static_cast<uint16_t>(((u >> 16) & 0x8000u) | (e > 0 && e < 31 ? (e << 10) | ((u >> 13) & 0x3ffu) : 0));
            }
        }
        Buffer cb(cb_host.size() * 2);
        upload(cb, cb_host.data(), cb_host.size() * 2);

        // Activations of one chunk.
        Buffer a = filled(size_t(M) * D, 4, 0), cq = filled(size_t(M) * Rq, 4, 0), q = filled(size_t(M) * H * Dh, 4, 0),
               kv = filled(size_t(M) * Dh, 4, 0), o = filled(size_t(M) * H * Dh, 4, 0), z(size_t(M) * G * Ro * 4),
               f(size_t(M) * D * 4), s1(size_t(M) * I * 4), s3(size_t(M) * I * 4), shared(size_t(M) * D * 4),
               logits(size_t(M) * E * 4), g1(size_t(M) * K * I * 4), g3(size_t(M) * K * I * 4),
               routed(size_t(M) * K * D * 4), route_w = filled(size_t(M) * K, 4, 0), bf_out(size_t(M) * 2 * Dh * 4),
               qi = filled(size_t(M) * Hi * Di, 4, 0), wi = filled(size_t(M) * Hi, 4, 0), sink = filled(H, 4, 0),
               ring = filled(size_t(W) * Dh, 4, 0), attn_out(size_t(M) * H * Dh * 4);
        std::vector<int32_t> ids(size_t(M) * K);
        {
            std::mt19937 r(11);
            std::uniform_int_distribution<int> pick(0, E - 1);
            for (int t = 0; t < M; ++t)
                for (int j = 0; j < K; ++j) {
                    int e;
                    bool dup;
                    do {
                        e = pick(r);
                        dup = std::find(&ids[size_t(t) * K], &ids[size_t(t) * K + j], e) != &ids[size_t(t) * K + j];
                    } while (dup);
                    ids[size_t(t) * K + j] = e;
                }
        }
        Buffer dids(ids.size() * 4), groups(moe_group_bytes(M * K, E));
        upload(dids, ids.data(), ids.size() * 4);
        const int max_prompt = 32768;
        Buffer entries = filled(size_t(max_prompt / 4) * Dh, 4, 0), ikeys = filled(size_t(max_prompt / 4) * Di, 4, 0),
               scores(size_t(M) * (max_prompt / 4) * 4), selected(size_t(M) * Ki * 4), selected_count(size_t(M) * 4);
        AFF_GPU_CHECK(hipDeviceSynchronize());

        auto gemm = [&](const Fp8& m, const Buffer& x, float* y) {
            fp8_gemm(m.w.as<uint8_t>(), m.s.as<uint8_t>(), m.n, m.k, x.as<float>(), m.k, M, y, m.n, hs);
        };
        auto gemv = [&](const Bf16& m) {
            bf16_gemm(m.w.as<uint16_t>(), m.n, m.k, a.as<float>(), D, M, bf_out.as<float>(), m.n, hs);
        };
        auto flops_of = [&](std::initializer_list<std::pair<int, int>> shapes) {
            double fl = 0.0;
            for (const auto& [n, k] : shapes) fl += 2.0 * M * n * k;
            return fl;
        };

        // Chunk-independent classes (same cost at every position), per kind.
        Cost proj_common, proj_csa, bf_common, bf_csa, bf_hca, experts;
        proj_common.ms = time_ms(s, [&] {
            gemm(wq_a, a, cq.as<float>());
            gemm(wq_b, cq, q.as<float>());
            gemm(wkv, a, kv.as<float>());
            for (int g = 0; g < G; ++g)
                fp8_gemm(wo_a.w.as<uint8_t>() + size_t(g) * Ro * wo_a.k, wo_a.s.as<uint8_t>() + size_t(g) * (Ro / 128) * (wo_a.k / 128),
                         Ro, wo_a.k, o.as<float>() + size_t(g) * wo_a.k, H * Dh, M, z.as<float>() + size_t(g) * Ro, G * Ro, hs);
            gemm(wo_b, z, f.as<float>());
            gemm(sh1, a, s1.as<float>());
            gemm(sh3, a, s3.as<float>());
            gemm(sh2, s1, shared.as<float>());
        });
        proj_common.flops = flops_of({{Rq, D}, {H * Dh, Rq}, {Dh, D}, {G * Ro, H * Dh / G}, {D, G * Ro}, {I, D}, {I, D}, {D, I}});
        proj_csa.ms = time_ms(s, [&] { gemm(iwq_b, cq, qi.as<float>()); });
        proj_csa.flops = flops_of({{Hi * Di, Rq}});
        bf_common.ms = time_ms(s, [&] { gemv(gate); });
        bf_common.flops = flops_of({{E, D}});
        bf_csa.ms = time_ms(s, [&] {
            gemv(ckv_csa);
            gemv(cg_csa);
            gemv(ikv);
            gemv(ig);
            gemv(iw);
        });
        bf_csa.flops = flops_of({{2 * Dh, D}, {2 * Dh, D}, {2 * Di, D}, {2 * Di, D}, {Hi, D}});
        bf_hca.ms = time_ms(s, [&] {
            gemv(ckv_hca);
            gemv(cg_hca);
        });
        bf_hca.flops = flops_of({{Dh, D}, {Dh, D}});
        Cost group_only, w13_only;
        experts.ms = time_ms(s, [&] {
            moe_group(dids.as<int32_t>(), M * K, E, groups.data(), hs);
            moe_gemm(t1.as<const uint8_t*>(), 0, I, D, groups.data(), M * K, E, a.as<float>(), K, g1.as<float>(),
                     cb.as<uint16_t>(), hs);
            moe_gemm(t3.as<const uint8_t*>(), 0, I, D, groups.data(), M * K, E, a.as<float>(), K, g3.as<float>(),
                     cb.as<uint16_t>(), hs);
            swiglu(g1.as<float>(), g3.as<float>(), (long long)M * K * I, 10.0f, g1.as<float>(), hs);
            moe_gemm(t2.as<const uint8_t*>(), 0, D, I, groups.data(), M * K, E, g1.as<float>(), 1, routed.as<float>(),
                     cb.as<uint16_t>(), hs);
            moe_combine(routed.as<float>(), route_w.as<float>(), M, K, D, shared.as<float>(), f.as<float>(), hs);
        });
        experts.flops = 2.0 * M * K * 3.0 * I * D;
        group_only.ms = time_ms(s, [&] { moe_group(dids.as<int32_t>(), M * K, E, groups.data(), hs); });
        w13_only.ms = time_ms(s, [&] {
            moe_gemm(t1.as<const uint8_t*>(), 0, I, D, groups.data(), M * K, E, a.as<float>(), K, g1.as<float>(),
                     cb.as<uint16_t>(), hs);
        });
        w13_only.flops = 2.0 * M * K * I * D;
        const Cost one_proj = [&] {
            Cost c;
            c.ms = time_ms(s, [&] { gemm(wq_b, cq, q.as<float>()); });
            c.flops = flops_of({{H * Dh, Rq}});
            return c;
        }();
        const double gemv_ms = time_ms(s, [&] {
            dense_gemv(ckv_csa.w.data(), DenseType::bf16, ckv_csa.n, ckv_csa.k, a.as<float>(), D, M, bf_out.as<float>(),
                       ckv_csa.n, hs);
        });
        const double gemm_ms = time_ms(s, [&] { gemv(ckv_csa); });
        std::printf("compressor wkv 1024x4096 BF16, 4096 tokens: bf16_gemm %.3f ms, dense_gemv (the decode path) %.3f ms\n",
                    gemm_ms, gemv_ms);
        std::printf("fp8_gemm wq_b 32768x1024, 4096 tokens: %.3f ms, %.1f TFLOP/s\n", one_proj.ms,
                    one_proj.flops / one_proj.ms / 1e9);
        std::printf("moe_gemm w1 (2048x4096 of 256 experts), 24576 jobs: %.3f ms, %.1f TFLOP/s; moe_group %.3f ms\n",
                    w13_only.ms, w13_only.flops / w13_only.ms / 1e9, group_only.ms);

        // Position-dependent classes: attention (and the CSA indexer) of the chunk at `start`.
        struct IndexerSplit {
            double scores_mma = 0.0, scores_fp32 = 0.0, topk = 0.0;
        };
        auto attention_cost = [&](Kind kind, long long start, Cost& indexer, IndexerSplit& split) {
            const int ratio = kind == kCsa ? 4 : 128;
            const int count = kind == kSliding ? 0 : static_cast<int>((start + M) / ratio);
            const int stride = max_prompt / 4;
            indexer = Cost{};
            if (kind == kCsa) {
                auto scores_by = [&](IndexerMath math) {
                    indexer_scores(qi.as<float>(), wi.as<float>(), ikeys.as<float>(), scores.as<float>(), M, Hi, Di, start,
                                   ratio, count, stride, hs, nullptr, math);
                };
                auto topk = [&] {
                    indexer_topk(scores.as<float>(), M, stride, start, ratio, count, Ki, selected.as<int32_t>(),
                                 selected_count.as<int32_t>(), hs);
                };
                split.scores_fp32 += time_ms(s, [&] { scores_by(IndexerMath::fp32); });
                split.scores_mma += time_ms(s, [&] { scores_by(IndexerMath::bf16_mma); });
                split.topk += time_ms(s, topk);
                indexer.ms = time_ms(s, [&] {
                    scores_by(IndexerMath::bf16_mma);
                    topk();
                });
                for (int t = 0; t < M; ++t) indexer.flops += 2.0 * Hi * Di * std::min<long long>(count, (start + t + 1) / ratio);
            }
            AttentionArgs aa;
            aa.q = q.as<float>();
            aa.kv = kv.as<float>();
            aa.ring = ring.as<float>();
            aa.sink = sink.as<float>();
            aa.out = attn_out.as<float>();
            aa.n = M;
            aa.heads = H;
            aa.head_dim = Dh;
            aa.window = W;
            aa.start = start;
            if (kind != kSliding) {
                aa.entries = entries.as<float>();
                aa.entry_count = count;
                aa.ratio = ratio;
            }
            if (kind == kCsa) {
                aa.selected = selected.as<int32_t>();
                aa.selected_count = selected_count.as<int32_t>();
                aa.selected_stride = Ki;
            }
            Cost c;
            c.ms = time_ms(s, [&] {
                attention(aa, hs);
                ring_store(ring.as<float>(), kv.as<float>(), M, Dh, W, start, hs);
            }, 1);
            for (int t = 0; t < M; ++t) {
                const long long p = start + t;
                double keys = static_cast<double>(std::min<long long>(W, p + 1));
                if (kind == kCsa) keys += std::min<long long>(Ki, std::min<long long>(count, (p + 1) / ratio));
                if (kind == kHca) keys += std::min<long long>(count, (p + 1) / ratio);
                c.flops += 4.0 * H * Dh * keys;
            }
            return c;
        };

        const int layers_of[3] = {2, 21, 20};
        double last_figure = 0.0, last_ratio = 0.0;
        for (const int prompt : {4096, 32768}) {
            Cost cls[3][kClasses];  // per kind, summed over the prompt's chunks
            IndexerSplit split;     // the CSA layer's indexer, summed over the prompt's chunks
            for (long long start = 0; start < prompt; start += M) {
                for (int kind = 0; kind < 3; ++kind) {
                    Cost idx;
                    const Cost att = attention_cost(static_cast<Kind>(kind), start, idx, split);
                    cls[kind][0] += proj_common;
                    if (kind == kCsa) cls[kind][0] += proj_csa;
                    cls[kind][1] += bf_common;
                    if (kind == kCsa) cls[kind][1] += bf_csa;
                    if (kind == kHca) cls[kind][1] += bf_hca;
                    cls[kind][2] += experts;
                    cls[kind][3] += idx;
                    cls[kind][4] += att;
                }
            }
            std::printf("== prompt %d tokens (%d chunks of %d); per layer, summed over chunks:\n", prompt, prompt / M, M);
            Cost total, by_class[kClasses];
            for (int kind = 0; kind < 3; ++kind) {
                Cost layer;
                for (int c = 0; c < kClasses; ++c) {
                    layer += cls[kind][c];
                    by_class[c] += cls[kind][c] * layers_of[kind];
                }
                total += layer * layers_of[kind];
                std::printf("  %-8s layer: %8.2f ms", kKindName[kind], layer.ms);
                for (int c = 0; c < kClasses; ++c)
                    if (cls[kind][c].ms > 0) std::printf("  %s %.2f", kClassName[c], cls[kind][c].ms);
                std::printf("\n");
            }
            const double idx_flops = cls[kCsa][3].flops;
            std::printf("  CSA indexer alone, per layer: scores bf16_mma %.2f ms (%.1f TFLOP/s), scores fp32 %.2f ms "
                        "(%.1f TFLOP/s), top-k %.2f ms; with fp32 scores the 43 layers' indexer would take %.1f ms\n",
                        split.scores_mma, idx_flops / split.scores_mma / 1e9, split.scores_fp32,
                        idx_flops / split.scores_fp32 / 1e9, split.topk, 21.0 * (split.scores_fp32 + split.topk));
            std::printf("  43 layers (2 sliding, 21 CSA, 20 HCA), by class:\n");
            for (int c = 0; c < kClasses; ++c)
                std::printf("    %-26s %9.1f ms %5.1f %%  %7.1f TFLOP  %6.1f TFLOP/s\n", kClassName[c], by_class[c].ms,
                            100.0 * by_class[c].ms / total.ms, by_class[c].flops / 1e12,
                            by_class[c].ms > 0 ? by_class[c].flops / by_class[c].ms / 1e9 : 0.0);
            const double secs = total.ms / 1e3, rate = total.flops / secs;
            std::printf("  prefill %d tokens: %.3f s for the 43 layers' timed classes = %.0f tok/s, %.1f TFLOP at %.1f "
                        "TFLOP/s\n",
                        prompt, secs, prompt / secs, total.flops / 1e12, rate / 1e12);
            last_figure = rate;
            last_ratio = rate / kPeak;
        }
        std::printf("figure: %.1f TFLOP/s achieved, 32K-token prefill (43 layers, timed classes)\n", last_figure / 1e12);
        std::printf("bound: %.1f TFLOP/s (H200 dense bf16 tensor peak)\n", kPeak / 1e12);
        std::printf("ratio: %.1f %%\n", 100.0 * last_ratio);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prefill_bench: %s\n", e.what());
        return 1;
    }
}
