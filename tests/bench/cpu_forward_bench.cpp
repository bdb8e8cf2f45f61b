// Benchmark: CPU reference decode speed (tok/s) on a tiny model, against a compute
// bound. The bound is the measured multiply-add rate of the forward's own dot kernel
// shape (float32, data in cache) on all threads, divided by the multiply-adds one decode
// step needs (every dense matrix once, k routed + the shared expert, window attention,
// indexer, hyper head and LM head). Tiny models are dispatch-bound, so expect a low ratio.
//   cpu_forward_bench [MODEL_DIR] [THREADS] [DECODE_TOKENS]
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {
double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Multiply-adds of one decode step at position p (model doc §3), dense view.
double macs_per_token(const aff::ModelConfig& c, double p) {
    const double D = c.hidden_size, H = c.num_heads, Dh = c.head_dim, Rq = c.q_lora_rank, G = c.o_groups,
                 Ro = c.o_lora_rank, I = c.moe_intermediate_size, k = c.experts_per_token, E = c.n_routed_experts,
                 n = c.hc_mult, M = c.mix_width(), Hi = c.index_heads, Di = c.index_head_dim, W = c.sliding_window;
    double total = c.vocab_size * D + n * n * D;  // LM head, hyper head
    for (int l = 0; l < c.num_layers; ++l) {
        double m = 2 * M * n * D;                                          // two mHC sites
        m += Rq * D + H * Dh * Rq + Dh * D + G * Ro * (H * Dh / G) + D * G * Ro;  // attention projections
        m += E * D + 3 * I * D * (k + c.n_shared_experts);                  // router, experts
        double keys = std::min(W, p + 1);
        const double r = c.compress_ratio[l];
        if (c.attention[l] == aff::AttentionKind::hca) m += 2 * Dh * D, keys += p / r;
        if (c.attention[l] == aff::AttentionKind::csa) {
            m += 2 * 2 * Dh * D + 2 * 2 * Di * D + Hi * Di * Rq + Hi * D;
            m += Hi * Di * (p / r);  // indexer scores
            keys += std::min<double>(c.index_topk, p / r);
        }
        m += 2 * H * Dh * keys;  // scores and weighted sum
        total += m;
    }
    return total;
}

// Multiply-adds per second of float32 dot products over cache-resident rows, on all threads.
double measured_mac_rate(aff::ThreadPool& pool) {
    const int rows = 256, cols = 256, reps = 400;
    std::vector<float> w(std::size_t(rows) * cols, 0.5f), x(cols, 0.25f), y(rows);
    const double t0 = now();
    pool.parallel_for(pool.size(), [&](std::size_t, std::size_t) {
        std::vector<float> yy(rows);
        for (int r = 0; r < reps; ++r)
            for (int i = 0; i < rows; ++i) {
                const float* a = &w[std::size_t(i) * cols];
                float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                for (int j = 0; j < cols; j += 4) {
                    s0 += a[j] * x[j];
                    s1 += a[j + 1] * x[j + 1];
                    s2 += a[j + 2] * x[j + 2];
                    s3 += a[j + 3] * x[j + 3];
                }
                yy[i] = (s0 + s1) + (s2 + s3);
            }
        y[0] += yy[0];
    });
    return double(rows) * cols * reps * pool.size() / (now() - t0);
}
}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "tests/data/models/tiny-a";
    const int threads = argc > 2 ? std::stoi(argv[2]) : 2;
    const int decode = argc > 3 ? std::stoi(argv[3]) : 200;
    aff::ThreadPool pool(threads);
    auto model = aff::Model::load(dir, pool);
    const aff::ModelConfig& c = model->config();
    std::vector<std::int32_t> prompt(64);
    for (int i = 0; i < 64; ++i) prompt[i] = (i * 7 + 3) % c.vocab_size;
    aff::DecodeState st = model->new_state();
    double t0 = now();
    auto logits = model->forward(st, prompt, false);
    const double prefill_s = now() - t0;
    std::int32_t tok = 0;
    double macs = 0;
    t0 = now();
    for (int i = 0; i < decode; ++i) {
        int best = 0;
        for (int v = 1; v < c.vocab_size; ++v)
            if (logits[v] > logits[best]) best = v;
        tok = best;
        macs += macs_per_token(c, double(st.position));
        logits = model->forward(st, std::span(&tok, 1), false);
    }
    const double decode_s = now() - t0;
    const double rate = measured_mac_rate(pool);
    const double figure = decode / decode_s, bound = rate / (macs / decode);
    std::printf("model %s, %d threads: prefill %d tokens %.1f tok/s; decode %d tokens %.1f tok/s\n", dir.c_str(),
                threads, int(prompt.size()), prompt.size() / prefill_s, decode, figure);
    std::printf("bound: %.0f multiply-adds/token at %.2f GMAC/s measured (dot kernel, %d threads) = %.0f tok/s; "
                "ratio %.3f\n", macs / decode, rate / 1e9, threads, bound, figure / bound);
    return 0;
}
