// What picking greedy tokens on the device saves (issue 18: acceptance on the device): a
// decode step and a verify call of 4 tokens (on the GEMVs, as a drafting sequence runs them)
// through GpuModel::forward with the rows copied back and picked on the host (greedy_pick:
// the logits path of the generation loop, the peer), and through forward_ids (argmax_rows on
// the device, 4 bytes a row back: the picks-only path), taking turns, medians over rounds.
// The bound on the saving is what the logits path does that forward_ids does not, each
// measured alone in the same run: copying rows·V floats to pageable host memory and the host
// pick over them (forward_ids adds its argmax launch and a few bytes back).
// Then the same for sampled picks at temperature 0.8 with no other filter: the peer copies the
// rows back and draws on the host (Sampler::sample for a step; Sampler::speculative for each
// guess of a verify call, then a plain draw), ours is forward_ids with RowDraws (kernels/
// speculative_rows: the draws and the acceptance on the device). Here the guesses' q rows
// go up from the host each verify call (3 rows of V floats, counted against ours); a drafter
// whose chain drew on the device leaves them there and skips that copy.
//     greedy_picks_bench CONTAINER.aff [CALLS]   (CALLS timed calls of each kind, default 64)
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "libaff/runtime/greedy_pick.hpp"
#include "libaff/runtime/sampled_pick.hpp"
#include "libaff/runtime/sampler.hpp"
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "greedy_picks_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The sampled table: a decode step and a verify call of 4 (3 guesses), the logits path with the
// host's Sampler against forward_ids with RowDraws, taking turns.
template <class Tokens>
void sampled_rows(aff::gpu::GpuModel& g, aff::gpu::GpuDecodeState& st, Tokens& tokens, int calls) {
    using namespace aff::gpu;
    const int V = g.config().vocab_size;
    const float t = 0.8f;
    aff::SamplerParams params;
    params.temperature = t;
    params.seed = 5;
    aff::Sampler sampler(params);
    // Three draft rows, a tempered softmax of random logits each, and guesses drawn from them.
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::vector<float> q(3 * std::size_t(V));
    for (int j = 0; j < 3; ++j) {
        std::vector<float> l(static_cast<std::size_t>(V), 0.0f);
        for (float& x : l) x = nd(rng);
        std::vector<float> row;
        sampler.distribution(l, row);
        std::copy(row.begin(), row.end(), q.begin() + std::ptrdiff_t(j) * V);
    }
    std::printf("\n%-34s %12s %12s %10s   (T %.1f, no other filter)\n", "sampled call", "logits ms", "picks ms",
                "saved ms", double(t));
    std::int64_t pos = st.position;
    for (const int n : {1, 4}) {
        g.set_gemv_calls(n > 1);
        std::vector<double> with_logits, with_picks;
        for (int i = 0; i < 2 * calls + 4; ++i) {
            std::vector<std::int32_t> toks = tokens(n);
            for (int j = 1; j < n; ++j) {  // guess j - 1 drawn from its q row
                const std::span<const float> row = std::span<const float>(q).subspan(std::size_t(j - 1) * V, std::size_t(V));
                std::discrete_distribution<int> d(row.begin(), row.end());
                toks[std::size_t(j)] = d(rng);
            }
            const bool picks = (i % 2) == 1;
            const std::size_t rows = n > 1 ? std::size_t(n) : 1;
            const auto t0 = Clock::now();
            std::vector<std::int32_t> ids;
            if (picks) {
                const std::vector<double> u = aff::positional_uniforms(9, pos + 1, rows);
                RowDraws d;
                d.temperature = t;
                d.uniforms = u;
                d.guesses = rows - 1;
                if (n > 1) d.q = q;
                ids = g.forward_ids(st, toks, n > 1, std::size_t(V), &d);
            } else {
                const std::vector<float> out = g.forward(st, toks, n > 1);
                for (std::size_t r = 0; r < rows; ++r) {
                    const std::span<const float> l = std::span<const float>(out).subspan(r * V, std::size_t(V));
                    ids.push_back(r + 1 < rows ? sampler.speculative(l, toks[r + 1], std::span<const float>(q).subspan(r * V, std::size_t(V)))
                                               : sampler.sample(l));
                }
            }
            pos += n;
            const double ms = ms_since(t0);
            if (i >= 4) (picks ? with_picks : with_logits).push_back(ms);
            if (ids.size() != rows) throw std::runtime_error("a sampled call returned the wrong number of picks");
        }
        g.set_gemv_calls(false);
        const double a = bench::median(with_logits), b = bench::median(with_picks);
        char label[64];
        std::snprintf(label, sizeof label, n == 1 ? "decode step (graph)" : "verify call of %d tokens (GEMVs)", n);
        std::printf("%-34s %12.3f %12.3f %10.3f   (medians of %d)\n", label, a, b, a - b, calls);
        if (n == 4)
            std::printf("figure: sampled picks on the device save %.3f ms a verify call of 4 (logits path %.3f ms, picks "
                        "%.3f ms, q rows copied up included)\n",
                        a - b, a, b);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: greedy_picks_bench CONTAINER.aff [CALLS]\n");
        return 2;
    }
    try {
        using namespace aff::gpu;
        const int calls = argc > 2 ? std::max(8, std::atoi(argv[2])) : 64;
        bench::open_bench_device();
        aff::ThreadPool pool(0);
        const bench::BenchModel model = bench::load_bench_model(argv[1], pool, 8192);
        GpuModel& g = *model.gpu;
        const int V = g.config().vocab_size;
        std::mt19937 rng(11);
        std::uniform_int_distribution<int> tok(0, V - 1);
        auto tokens = [&](int n) {
            std::vector<std::int32_t> t(std::size_t(n), 0);
            for (auto& x : t) x = tok(rng);
            return t;
        };
        GpuDecodeState st = g.new_state();
        g.forward(st, tokens(64), false);

        std::printf("\n%-34s %12s %12s %10s %14s\n", "call", "logits ms", "picks ms", "saved ms", "bound ms");
        double saved_step = 0, bound_step = 0;
        for (const int n : {1, 4}) {
            g.set_gemv_calls(n > 1);
            std::vector<double> with_logits, with_picks;
            long long disagree = 0;
            for (int i = 0; i < 2 * calls + 4; ++i) {  // 4 warm-up calls, then the two taking turns
                const std::vector<std::int32_t> t = tokens(n);
                const bool picks = (i % 2) == 1;
                const auto t0 = Clock::now();
                std::vector<std::int32_t> ids;
                if (picks) {
                    ids = g.forward_ids(st, t, n > 1, std::size_t(V));
                } else {
                    const std::vector<float> rows = g.forward(st, t, n > 1);
                    ids = aff::greedy_picks(rows, std::size_t(V), std::size_t(V));
                }
                const double ms = ms_since(t0);
                if (i >= 4) (picks ? with_picks : with_logits).push_back(ms);
                disagree += ids.size() == std::size_t(n > 1 ? n : 1) ? 0 : 1;
            }
            g.set_gemv_calls(false);
            // What the logits path does beyond forward_ids, each alone: the copy of the rows to
            // pageable memory, and the host pick.
            const std::size_t rows = std::size_t(n > 1 ? n : 1), bytes = rows * std::size_t(V) * 4;
            Buffer dev(bytes);
            Stream s;
            std::vector<float> host(rows * std::size_t(V), 0.0f);
            std::vector<double> copy_ms, pick_ms;
            for (int i = 0; i < calls; ++i) {
                auto t0 = Clock::now();
                s.copy(host.data(), dev.data(), bytes);
                s.synchronize();
                copy_ms.push_back(ms_since(t0));
                host[std::size_t(i) % host.size()] = float(i);  // not constant: the pick must run
                t0 = Clock::now();
                const std::vector<std::int32_t> p = aff::greedy_picks(host, std::size_t(V), std::size_t(V));
                pick_ms.push_back(ms_since(t0));
                disagree += p.size() == rows ? 0 : 1;
            }
            const double a = bench::median(with_logits), b = bench::median(with_picks);
            const double bound = bench::median(copy_ms) + bench::median(pick_ms);
            char label[64];
            std::snprintf(label, sizeof label, n == 1 ? "decode step (graph)" : "verify call of %d tokens (GEMVs)", n);
            std::printf("%-34s %12.3f %12.3f %10.3f %14.3f   (copy %.3f + pick %.3f; medians of %d)\n", label, a, b,
                        a - b, bound, bench::median(copy_ms), bench::median(pick_ms), calls);
            if (disagree) throw std::runtime_error("a call returned the wrong number of picks");
            if (n == 1) {
                saved_step = a - b;
                bound_step = bound;
            }
            if (n == 4) {
                std::printf("\nfigure: greedy picks on the device save %.3f ms a decode step, %.3f ms a verify call of 4 "
                            "(the verify call: logits path %.3f ms, picks %.3f ms)\n",
                            saved_step, a - b, a, b);
                std::printf("bound: the logits path's copy and host pick, measured alone: %.3f ms a step, %.3f ms a verify "
                            "call of 4\n",
                            bound_step, bound);
                std::printf("ratio: saved / bound: step %.2f, verify %.2f (1.00: everything the picks avoid is saved)\n",
                            bound_step > 0 ? saved_step / bound_step : 0.0, bound > 0 ? (a - b) / bound : 0.0);
            }
        }
        sampled_rows(g, st, tokens, calls);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "greedy_picks_bench: %s\n", e.what());
        return 1;
    }
}
#endif
