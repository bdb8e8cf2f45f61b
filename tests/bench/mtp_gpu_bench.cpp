// Speculative decoding with the MTP layer on the GPU (issue 18): what a verify call costs
// against single steps at V4-Flash's real geometry, what the drafts cost, and the tokens a
// second that gives at the trained tiny model's measured acceptance, net of everything.
//   1. The trained tiny model on the GPU (its checkpoint and results.json's held-out windows):
//      greedy generation without drafts, with drafts of up to k = 1 .. 3 and with --draft
//      auto's gate; outputs must be identical (the bench fails otherwise); acceptance by
//      position, wall-clock decode tok/s, the drafts' share. This model is small enough that
//      a step is bound by launches, not by reading weights: not where drafting pays.
//   2. A real-geometry container with an MTP layer (make_geometry_container --mtp): medians of
//      a decode step (captured graph), of a verify call of k+1 tokens (forward, all logits,
//      with its rewind point and the rewind the loop makes), of the MTP layer's catch-up over
//      m positions and of a chained draft step; the 43-layer figures extrapolated from the
//      per-layer slope (set_max_layers 0 and all; the container's layers are sliding ones,
//      the MTP layer's cost does not grow with the trunk). Then, for k = 1 .. 3, the expected
//      tokens a second at part 1's acceptance by position a_i (greedy: the share of verify
//      calls whose first i guesses held, the same for every k >= i): a cycle accepts j of k
//      with probability a_j - a_{j+1}, yields j + 1 tokens and costs the verify call, the MTP
//      catch-up over j + 1 positions, k - 1 chained steps, and, when j < k, the replay of
//      j + 1 tokens after the rewind (gpu_sequence.hpp: a rewind into a call replays its
//      head); against 1 / step. All that for three configurations: all resident; the
//      trunk's experts tiered with a GPU slab of a quarter of them (GpuTierOptions::slab_cap,
//      placed statically, each layer's first quarter, so no mover runs between timed calls)
//      and the draft's experts in RAM (--draft-placement ram, auto's choice when tiered); the
//      same with the draft's in VRAM. The 43-layer figures of a tiered configuration
//      extrapolate the per-layer slope at that slab share. The last lines: one figure per
//      configuration with its bound (tokens a verify call: the speed-up if verifying cost one
//      step and drafting nothing), and whether auto drafts.
//     mtp_gpu_bench TRAINED_DIR RESULTS_JSON GEOMETRY.aff [WINDOWS=4] [PROMPT=64] [GEN=64] [REPS=15]
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/runtime/draft_gate.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_mtp_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"
#include "libaff/runtime/mtp_drafter.hpp"
#include "timed_drafter.hpp"

#include <nlohmann/json.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "mtp_gpu_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using aff::gpu::bench::median;

// Seconds on the steady clock: the GPU's work is synchronous to the host here.
double wall_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
using TimedDrafter = aff::bench::TimedDrafter;

struct Totals {
    std::size_t tokens = 0, verify_calls = 0, drafted = 0, accepted = 0;
    std::vector<std::size_t> drafted_at, accepted_at;
    double decode_seconds = 0, draft_seconds = 0;
    double rate() const { return decode_seconds > 0 ? double(tokens) / decode_seconds : 0; }
    double at(std::size_t i) const { return i < drafted_at.size() && drafted_at[i] ? double(accepted_at[i]) / double(drafted_at[i]) : 0; }
};

std::unique_ptr<aff::Drafter> gpu_drafter(aff::Sequence& seq, std::size_t k) {
    std::string why;
    auto runner = aff::make_gpu_mtp_runner(seq, why);
    if (!runner) throw std::runtime_error("no GPU MTP runner: " + why);
    return std::make_unique<aff::MtpDrafter>(std::move(runner), k);
}

// Part 1: returns the acceptance by position of the k = 3 run (a_1, a_2, a_3).
std::vector<double> trained_on_gpu(const std::string& dir, const std::string& results_path, std::size_t windows,
                                   std::size_t prompt_len, std::size_t gen, bool& auto_drafting) {
    std::ifstream in(results_path);
    if (!in) throw std::runtime_error("cannot open " + results_path);
    const nlohmann::json results = nlohmann::json::parse(in);
    const auto& all = results.at("eval_windows");
    windows = std::min(windows, all.size());
    aff::ThreadPool pool(0);
    auto model = aff::Model::load(dir, pool);
    const aff::Checkpoint ck(dir);
    struct Config {
        std::string label;
        std::size_t k = 0;
        bool gated = false;
        std::unique_ptr<aff::Sequence> seq;
        std::unique_ptr<aff::Drafter> drafter;
        aff::DraftGate* gate = nullptr;
        std::unique_ptr<TimedDrafter> timed;
        Totals t;
    };
    std::vector<Config> configs;
    auto add = [&](std::string label, std::size_t k, bool gated) {
        Config& c = configs.emplace_back();
        c.label = std::move(label);
        c.k = k;
        c.gated = gated;
        c.seq = aff::make_gpu_sequence(*model, &ck, aff::gpu::GpuOptions{});
        if (k == 0) return;
        c.drafter = gpu_drafter(*c.seq, k);
        if (gated) {
            auto gate = std::make_unique<aff::DraftGate>(std::move(c.drafter));
            c.gate = gate.get();
            c.drafter = std::move(gate);
        }
        c.timed = std::make_unique<TimedDrafter>(*c.drafter, wall_seconds);
    };
    add("off", 0, false);
    for (std::size_t k = 1; k <= 3; ++k) add("mtp k=" + std::to_string(k), k, false);
    add("auto", 3, true);
    std::printf("part 1: %s on the GPU, %zu held-out windows, prompt %zu, %zu generated (greedy)\n", dir.c_str(), windows,
                prompt_len, gen);
    for (std::size_t w = 0; w < windows; ++w) {
        const std::vector<std::int32_t> tokens = all[w].get<std::vector<std::int32_t>>();
        std::vector<std::int32_t> greedy;
        for (Config& c : configs) {
            c.seq->reset();
            aff::GenerateOptions opt;
            opt.prompt.assign(tokens.begin(), tokens.begin() + std::ptrdiff_t(std::min(prompt_len, tokens.size())));
            opt.max_new_tokens = gen;
            opt.sampling.temperature = 0;
            std::vector<std::int32_t> out;
            Clock::time_point decode_start;
            aff::GenerateHooks h;
            h.on_step = [&](const aff::GenerationStep& s) {
                if (out.empty()) decode_start = Clock::now();
                out.push_back(s.token);
                return true;
            };
            h.drafter = c.timed.get();
            const double draft_before = c.timed ? c.timed->seconds : 0.0;
            const aff::GenerateStats s = aff::generate(*c.seq, opt, h);
            Totals& t = c.t;
            t.decode_seconds += since(decode_start);
            t.draft_seconds += c.timed ? c.timed->seconds - draft_before : 0.0;
            t.tokens += s.generated_tokens - 1;
            t.verify_calls += s.verify_calls;
            t.drafted += s.drafted_tokens;
            t.accepted += s.accepted_tokens;
            t.drafted_at.resize(std::max(t.drafted_at.size(), s.drafted_at.size()), 0);
            t.accepted_at.resize(t.drafted_at.size(), 0);
            for (std::size_t i = 0; i < s.drafted_at.size(); ++i) {
                t.drafted_at[i] += s.drafted_at[i];
                t.accepted_at[i] += s.accepted_at[i];
            }
            if (c.k == 0) greedy = out;
            else if (out != greedy)
                throw std::runtime_error("window " + std::to_string(w) + ": greedy output with " + c.label +
                                         " differs from the output without drafts on the GPU");
        }
    }
    std::printf("%-8s %9s %9s %12s %8s %8s  %s\n", "drafts", "tok/s", "speed-up", "accepted/vc", "draft %", "calls",
                "by position");
    const double plain = configs.front().t.rate();
    for (const Config& c : configs) {
        const Totals& t = c.t;
        std::printf("%-8s %9.1f %8.2fx %12.3f %7.1f%% %8zu ", c.label.c_str(), t.rate(), plain > 0 ? t.rate() / plain : 0,
                    t.verify_calls ? double(t.accepted) / double(t.verify_calls) : 0.0,
                    t.decode_seconds > 0 ? 100.0 * t.draft_seconds / t.decode_seconds : 0.0, t.verify_calls);
        for (std::size_t i = 0; i < t.drafted_at.size(); ++i) std::printf(" %.3f", t.at(i));
        std::printf("\n");
        if (c.gate) {
            // What the gate chose by its measurements; the cycle running when the generation
            // ended may be a probe of the other way.
            auto_drafting = c.gate->drafting_rate() > c.gate->plain_rate();
            std::printf("auto: the gate measured %.1f tok/s drafting, %.1f plain; it keeps to %s (running at the end: %s)\n",
                        c.gate->drafting_rate(), c.gate->plain_rate(), auto_drafting ? "drafts" : "plain steps",
                        c.gate->drafting() ? "a drafting cycle" : "a plain step");
        }
    }
    std::printf("greedy outputs with drafts on the GPU: identical to those without for k = 1 .. 3 and auto\n");
    const Totals& k3 = configs[3].t;
    return {k3.at(0), k3.at(1), k3.at(2)};
}

// Part 2 on one configuration of the container: the costs, then the tok/s at acceptance `a`.
struct Best {
    double speedup = 0, bound = 0;
    std::size_t k = 0;
};
Best geometry_costs(const std::string& path, const std::string& label, aff::gpu::GpuModel& g, const std::vector<double>& a,
                    int reps) {
    using namespace aff::gpu;
    if (!g.has_mtp()) throw std::runtime_error("the container's MTP layer is not on the GPU: " + g.mtp_why_not());
    const aff::ModelConfig& c = g.config();
    const int V = c.vocab_size, L = c.num_layers;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> tok(0, V - 1);
    auto tokens = [&](int n) {
        std::vector<std::int32_t> t(n);
        for (auto& x : t) x = tok(rng);
        return t;
    };
    GpuDecodeState st = g.new_state();
    g.forward(st, tokens(64), false);
    GpuRewindPoint point;
    const std::vector<std::int32_t> one = tokens(1);
    auto timed = [&](auto&& before, auto&& what, auto&& after) {
        std::vector<double> ms;
        for (int r = 0; r < reps + 2; ++r) {  // two warm-up rounds (graph capture)
            before();
            const auto t0 = Clock::now();
            what();
            if (r >= 2) ms.push_back(since(t0) * 1e3);
            after();
        }
        return median(ms);
    };
    auto nothing = [] {};
    struct Costs {
        double step = 0, call[5] = {}, mtp[5] = {}, chain = 0, rewind = 0;
    };
    GpuDecodeState mst = g.new_mtp_state();
    auto measure = [&](int layers) {
        g.set_max_layers(layers);
        Costs k;
        // A decode step without drafts (no rewind point; the position moves on a token a rep).
        k.step = timed(nothing, [&] { g.forward(st, one, false); }, nothing);
        // A call of n tokens as the loop makes it while drafting: its rewind point, the
        // call (logits of every token); rewound after, so the position stays.
        for (int n = 1; n <= 4; ++n) {
            const std::vector<std::int32_t> t = tokens(n);
            k.call[n] = timed([&] { g.rewind_point(st, n, point); }, [&] { g.forward(st, t, n > 1); },
                              [&] { g.rewind(st, point); });
        }
        // The rewind's copies back, timed with the step after them.
        k.rewind = timed([&] { g.rewind_point(st, 1, point), g.forward(st, one, false); },
                         [&] { g.rewind(st, point), g.forward(st, one, false); }, nothing) - k.step;
        // The MTP layer over m positions of the last call's streams, and a chained step.
        for (int m = 1; m <= 4; ++m) {
            const std::vector<std::int32_t> t = tokens(m);
            k.mtp[m] = timed([&] {
                g.forward(st, t, m > 1);
                g.keep_streams(mst, st.position - m, 0, m);
                g.mtp_restart(mst, st.position - m);
            }, [&] { g.mtp_forward(mst, t, MtpInput::trunk); }, nothing);
        }
        k.chain = timed(nothing, [&] { g.mtp_forward(mst, one, MtpInput::own); }, nothing);
        return k;
    };
    const Costs none = measure(0), all = measure(-1);
    g.set_max_layers(-1);
    // 43 layers: the head-only call plus 43 times the per-layer slope; the MTP layer and
    // the rewind as measured.
    Costs flash = all;
    auto extrapolate = [&](double head, double full) { return head + 43.0 * (full - head) / L; };
    flash.step = extrapolate(none.step, all.step);
    for (int n = 1; n <= 4; ++n) flash.call[n] = extrapolate(none.call[n], all.call[n]);
    std::printf("\npart 2, %s: %s (%d layers + MTP layer), median of %d, ms\n", label.c_str(), path.c_str(), L, reps);
    std::printf("%-30s %10s %10s %10s %10s\n", "", "1 token", "2 tokens", "3 tokens", "4 tokens");
    auto row = [&](const char* what, const double* v) {
        std::printf("%-30s %10.3f %10.3f %10.3f %10.3f\n", what, v[1], v[2], v[3], v[4]);
    };
    double singles[5], flash_singles[5];
    for (int n = 1; n <= 4; ++n) singles[n] = n * all.step, flash_singles[n] = n * flash.step;
    row("verify-sized call (measured)", all.call);
    row("n decode steps (measured)", singles);
    row("verify-sized call (43 layers)", flash.call);
    row("n decode steps (43 layers)", flash_singles);
    row("MTP catch-up over n positions", all.mtp);
    std::printf("decode step %.3f ms measured, %.3f ms at 43 layers; MTP chained step %.3f ms; rewind %.3f ms\n",
                all.step, flash.step, all.chain, all.rewind);

    // Expected tokens a second at the measured acceptance.
    std::printf("\nacceptance by position (part 1, k = 3): %.3f %.3f %.3f\n", a[0], a[1], a[2]);
    Best best;
    for (const Costs* costs : {&all, static_cast<const Costs*>(&flash)}) {
        const bool is_flash = costs == &flash;
        std::printf("%s: plain %.1f tok/s\n", is_flash ? "43 layers" : "measured", 1e3 / costs->step);
        for (std::size_t k = 1; k <= 3; ++k) {
            std::vector<double> acc(k + 2, 0.0);  // acc[i]: first i guesses held
            acc[0] = 1;
            for (std::size_t i = 1; i <= k; ++i) acc[i] = a[i - 1];
            double tokens_per = 0, ms = costs->call[k + 1] + (k - 1) * costs->chain;
            for (std::size_t j = 0; j <= k; ++j) {
                const double p = acc[j] - acc[j + 1];
                tokens_per += p * double(j + 1);
                ms += p * (costs->mtp[j + 1] + (j < k ? costs->rewind + costs->call[j + 1] : 0.0));
            }
            const double rate = tokens_per * 1e3 / ms, plain = 1e3 / costs->step;
            std::printf("  k=%zu: %.2f tokens a verify call, %.3f ms a cycle, %.1f tok/s, speed-up %.2fx (bound %.2fx)\n", k,
                        tokens_per, ms, rate, rate / plain, tokens_per * costs->step / costs->call[k + 1]);
            if (is_flash && rate / plain > best.speedup) best = {rate / plain, tokens_per, k};
        }
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: mtp_gpu_bench TRAINED_DIR RESULTS_JSON GEOMETRY.aff [WINDOWS] [PROMPT] [GEN] [REPS]\n");
        return 2;
    }
    auto arg = [&](int i, long dflt) { return argc > i ? std::max(1L, std::strtol(argv[i], nullptr, 10)) : dflt; };
    const std::size_t windows = std::size_t(arg(4, 4)), prompt_len = std::size_t(arg(5, 64)), gen = std::size_t(arg(6, 64));
    const int reps = int(arg(7, 15));
    try {
        using namespace aff::gpu;
        bench::open_bench_device();
        bool auto_drafting = false;
        const std::vector<double> a = trained_on_gpu(argv[1], argv[2], windows, prompt_len, gen, auto_drafting);

        // Part 2: costs at the real geometry: all resident, then the trunk's experts tiered
        // with a slab of a quarter of them (placed statically: each layer's first quarter, so
        // a random token's expert is in the slab with odds 1/4 in every layer, and no mover
        // runs between the timed calls), the draft's experts in RAM (auto's choice there) and
        // in VRAM.
        aff::ThreadPool pool(0);
        struct Config {
            std::string label;
            Best best;
        };
        std::vector<Config> configs;
        std::size_t slot = 0;
        std::int64_t trunk_experts = 0;
        std::vector<std::uint64_t> quarter;  // the static placement's profile: each layer's first quarter busiest
        {
            GpuOptions o;
            o.max_context = 4096;
            const bench::BenchModel bm = bench::load_bench_model(argv[3], pool, o);
            if (!bm.gpu->has_mtp()) throw std::runtime_error("the container's MTP layer is not on the GPU: " + bm.gpu->mtp_why_not());
            slot = (bm.gpu->expert_extent(0, 0).bytes + 255) / 256 * 256;
            const int E = bm.gpu->config().n_routed_experts;
            trunk_experts = std::int64_t(bm.gpu->config().num_layers) * E;
            quarter.assign(std::size_t(trunk_experts), 0);
            for (std::int64_t i = 0; i < trunk_experts; ++i) quarter[std::size_t(i)] = i % E < E / 4 ? 1 : 0;
            configs.push_back({"all resident", geometry_costs(argv[3], "all resident", *bm.gpu, a, reps)});
        }
        for (const DraftPlacement where : {DraftPlacement::ram, DraftPlacement::vram}) {
            GpuOptions o;
            o.max_context = 4096;
            o.tiers.slab_cap = std::size_t(trunk_experts / 4) * slot;
            o.tiers.strategy = "static";
            o.tiers.profile = quarter;
            o.draft_placement = where;
            const std::string label = std::string("trunk tiered (slab 1/4), draft's experts in ") +
                                      (where == DraftPlacement::ram ? "RAM" : "VRAM");
            const bench::BenchModel bm = bench::load_bench_model(argv[3], pool, o);
            const GpuTierReport r = bm.gpu->tiers();
            if (!r.tiered) throw std::runtime_error(label + ": not tiered (" + r.why + ")");
            std::printf("%s: %lld trunk experts in the slab, %lld in the host pool\n", label.c_str(), (long long)r.on_gpu,
                        (long long)r.in_pool);
            configs.push_back({label, geometry_costs(argv[3], label, *bm.gpu, a, reps)});
        }
        std::printf("\n");
        for (const Config& cf : configs)
            std::printf("figure (%s): V4-Flash geometry (43 layers extrapolated), MTP drafts at the trained tiny model's "
                        "acceptance: best k=%zu, %.2fx the tokens a second without drafts, net of drafting, verify and replay; "
                        "bound %.2f tokens a verify call\n",
                        cf.label.c_str(), cf.best.k, cf.best.speedup, cf.best.bound);
        std::printf("auto on the trained tiny model (launch-bound): %s\n", auto_drafting ? "keeps to drafts" : "keeps to plain steps");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mtp_gpu_bench: %s\n", e.what());
        return 1;
    }
}
#endif
