// Speculative decoding with DSpark's block drafter on the GPU (issue 18), on a real-geometry
// container with its draft container (make_geometry_container --dspark: V4-Flash-0731's three
// stages, random weights): what a verify call costs against single steps, what the drafts
// cost, and the tokens a second that gives at an acceptance, net of the drafts' cost. All
// resident (no tiering). As mtp_gpu_bench does for the MTP drafter:
//   1. Greedy generation on the GPU (the drafter as aff-run --draft dspark builds it:
//      make_gpu_sequence, make_gpu_dspark_runner, DsparkDrafter): without drafts, with up to
//      5 drafts verified whatever their confidence (min_survival 0, so every position's
//      acceptance is measured), and with --draft auto's gate (DraftGate over the drafter
//      with the default survival cut); whether the outputs are identical (reported: the
//      prompt is shorter than the prefill GEMMs' threshold, as tests/gpu/dspark_gpu_device.sh's).
//      Random weights: the measured acceptance is about 0, where drafting loses.
//   2. Medians of a decode step (captured graph, taps off as without drafts), of a verify
//      call of n = k + 1 tokens (all logits, GEMVs as the loop's calls take them, with its
//      rewind point and the rewind after; taps on, as while drafting), of the rewind, of the
//      stages' ring extend over m positions, of the draft block, of the greedy chain of k
//      guesses on the device (GpuModel::dspark_greedy: the drafter's path at temperature 0)
//      and, for reference, of one guess on the host path (the Markov-corrected row to host,
//      its argmax, the confidence head). The 43-layer
//      trunk figures extrapolated from the per-layer slope (set_max_layers 0 and all, taps
//      off; the taps' cost measured at all layers added, since three tap layers are three at
//      any depth); the stages' costs as measured (they do not grow with the trunk).
//   3. For k = 1 .. 5, the expected tokens a second at an acceptance by position a_i (the
//      share of cycles whose first i guesses held): a cycle accepts j of k with probability
//      a_j - a_{j+1}, yields j + 1 tokens and costs the verify call of k + 1, the proposal
//      (block + greedy chain of k), the ring extend over j + 1 positions and, when j < k, the rewind
//      and the replay of j + 1 tokens; against 1 / step. At (a) part 1's measured acceptance
//      and (b) an assumed geometric profile a_i = q^i (q = 0.8: an assumption, not a
//      measurement); and the break-even q for each k (the lowest at which drafting pays).
//      The last lines: one figure per configuration with its bound (tokens a verify call
//      times step / verify call: the speed-up if the drafts cost nothing), and whether auto
//      drafts at the measured acceptance.
//     dspark_gpu_bench GEOMETRY.aff [REPS=15] [PROMPT=4] [GEN=64]
#if defined(AFF_HAVE_GPU)
#include "bench_model.hpp"
#include "libaff/model/draft_load.hpp"
#include "libaff/runtime/draft_gate.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"
#include "timed_drafter.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if !defined(AFF_HAVE_GPU)
int main() {
    std::fprintf(stderr, "dspark_gpu_bench: needs a GPU build (cmake -DAFF_GPU=CUDA or HIP)\n");
    return 2;
}
#else

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double wall_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
using aff::gpu::bench::median;

constexpr std::size_t kMax = 5;  // γ: the block's guesses

struct Run {
    std::vector<std::int32_t> out;
    aff::GenerateStats stats;
    double decode_seconds = 0, draft_seconds = 0;
    double rate() const { return decode_seconds > 0 ? double(out.size() - 1) / decode_seconds : 0; }
    double at(std::size_t i) const {
        return i < stats.drafted_at.size() && stats.drafted_at[i] ? double(stats.accepted_at[i]) / double(stats.drafted_at[i]) : 0;
    }
};

Run generate_on(aff::Sequence& seq, aff::Drafter* drafter, const std::vector<std::int32_t>& prompt, std::size_t gen) {
    seq.reset();
    aff::GenerateOptions opt;
    opt.prompt = prompt;
    opt.max_new_tokens = gen;
    opt.sampling.temperature = 0;
    Run r;
    std::unique_ptr<aff::bench::TimedDrafter> timed;
    if (drafter) timed = std::make_unique<aff::bench::TimedDrafter>(*drafter, wall_seconds);
    Clock::time_point decode_start;
    aff::GenerateHooks h;
    h.on_step = [&](const aff::GenerationStep& s) {
        if (r.out.empty()) decode_start = Clock::now();
        r.out.push_back(s.token);
        return true;
    };
    h.drafter = timed.get();
    r.stats = aff::generate(seq, opt, h);
    r.decode_seconds = since(decode_start);
    r.draft_seconds = timed ? timed->seconds : 0;
    return r;
}

std::unique_ptr<aff::DsparkDrafter> drafter_on(const aff::Model& model, aff::Sequence& seq, float min_survival) {
    std::string why;
    auto runner = aff::make_gpu_dspark_runner(model, seq, why);
    if (!runner) throw std::runtime_error("no GPU DSpark runner: " + why);
    if (runner->stages().find("on the GPU") == std::string::npos)
        throw std::runtime_error("the DSpark stages are not on the GPU: " + runner->stages());
    return std::make_unique<aff::DsparkDrafter>(std::move(runner), kMax, min_survival);
}

struct Costs {
    double step = 0, call[kMax + 2] = {}, rewind = 0;
};

// The expected tokens a verify call and ms a cycle for k guesses at acceptance acc (acc[i]:
// the first i held, acc[0] = 1, size k + 2 with acc[k + 1] = 0).
struct Cycle {
    double tokens = 0, ms = 0;
};
Cycle cycle(const Costs& t, const double* extend, double proposal, std::size_t k, const std::vector<double>& acc) {
    Cycle c{0, t.call[k + 1] + proposal};
    for (std::size_t j = 0; j <= k; ++j) {
        const double p = acc[j] - acc[j + 1];
        c.tokens += p * double(j + 1);
        c.ms += p * (extend[j + 1] + (j < k ? t.rewind + t.call[j + 1] : 0.0));
    }
    return c;
}
std::vector<double> profile_of(const std::vector<double>& a, std::size_t k) {
    std::vector<double> acc(k + 2, 0.0);
    acc[0] = 1;
    for (std::size_t i = 1; i <= k; ++i) acc[i] = std::min(acc[i - 1], i - 1 < a.size() ? a[i - 1] : 0.0);
    return acc;
}
std::vector<double> geometric(double q) {
    std::vector<double> a(kMax);
    double x = 1;
    for (double& v : a) v = x *= q;
    return a;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: dspark_gpu_bench GEOMETRY.aff [REPS] [PROMPT] [GEN]\n");
        return 2;
    }
    auto arg = [&](int i, long dflt) { return argc > i ? std::max(1L, std::strtol(argv[i], nullptr, 10)) : dflt; };
    const int reps = int(arg(2, 15));
    const std::size_t prompt_len = std::size_t(arg(3, 4)), gen = std::size_t(arg(4, 64));
    try {
        using namespace aff::gpu;
        bench::open_bench_device();
        const std::string path = argv[1], draft_path = aff::default_draft_path(path);
        aff::ThreadPool pool(0);
        const auto t0 = Clock::now();
        auto model = aff::load_model_with_draft(path, draft_path, pool);
        if (!model->has_dspark()) throw std::runtime_error(draft_path + ": no DSpark stages");
        const aff::ContainerTensorReader stored(std::make_shared<const aff::Container>(aff::Container::open(path)));
        GpuOptions o;
        o.max_context = 4096;
        auto seq = aff::make_gpu_sequence(*model, &stored, o);
        GpuModel& g = dynamic_cast<aff::GpuTrunk&>(*seq).gpu_model();
        if (!g.has_dspark()) throw std::runtime_error("the DSpark stages are not on the GPU: " + g.dspark_why_not());
        const aff::ModelConfig& c = g.config();
        const int V = c.vocab_size, L = c.num_layers, D = c.hidden_size;
        const std::size_t taps = c.dspark.tap_layers.size();
        std::printf("%s + %s: %d layers + %zu DSpark stages, %d experts, taps %zu, load %.1f s\n%s\n", path.c_str(),
                    draft_path.c_str(), L, model->weights().dspark.stages.size(), c.n_routed_experts, taps,
                    since(t0), g.describe().c_str());

        // Part 1: greedy generation, without drafts, with 5 drafts, with auto.
        std::mt19937 rng(5);
        std::uniform_int_distribution<int> tok(0, V - 1);
        auto tokens = [&](std::size_t n) {
            std::vector<std::int32_t> t(n);
            for (auto& x : t) x = tok(rng);
            return t;
        };
        const std::vector<std::int32_t> prompt = tokens(prompt_len);
        generate_on(*seq, nullptr, prompt, 8);  // warm-up: the decode graph's capture out of the timed runs
        const Run plain = generate_on(*seq, nullptr, prompt, gen);
        Run drafted;
        {
            auto d = drafter_on(*model, *seq, 0.0f);
            drafted = generate_on(*seq, d.get(), prompt, gen);
        }
        Run gated;
        bool auto_drafting = false;
        double gate_drafting = 0, gate_plain = 0;
        {
            aff::DraftGate gate(drafter_on(*model, *seq, aff::dspark_min_survival));
            gated = generate_on(*seq, &gate, prompt, gen);
            gate_drafting = gate.drafting_rate(), gate_plain = gate.plain_rate();
            auto_drafting = gate_drafting > gate_plain;
        }
        // Drafting's calls take the GEMVs (gpu_sequence.hpp); a prompt shorter than the prefill
        // GEMMs' threshold keeps the runs without drafts on them too, so the outputs differ
        // only where fp32 summation order turns a near tie of random weights: reported, not
        // fatal (the greedy identity is tests/gpu/dspark_gpu_device.sh's check).
        auto first_difference = [&](const Run& r) {
            std::size_t i = 0;
            while (i < r.out.size() && i < plain.out.size() && r.out[i] == plain.out[i]) ++i;
            return i == r.out.size() && i == plain.out.size() ? std::string("identical")
                                                               : "DIFFER from token " + std::to_string(i);
        };
        std::printf("\npart 1: prompt %zu random tokens, %zu generated (greedy); outputs with drafts k=5: %s, auto: %s\n",
                    prompt_len, gen, first_difference(drafted).c_str(), first_difference(gated).c_str());
        std::printf("%-10s %9s %8s %8s  %s\n", "drafts", "tok/s", "draft %", "calls", "acceptance by position");
        std::vector<double> a;
        for (std::size_t i = 0; i < kMax; ++i) a.push_back(drafted.at(i));
        const std::pair<const char*, const Run*> runs[] = {{"off", &plain}, {"dspark k=5", &drafted}, {"auto", &gated}};
        for (const auto& [label, r] : runs) {
            std::printf("%-10s %9.1f %7.1f%% %8zu ", label, r->rate(),
                        r->decode_seconds > 0 ? 100.0 * r->draft_seconds / r->decode_seconds : 0.0, r->stats.verify_calls);
            for (std::size_t i = 0; i < r->stats.drafted_at.size(); ++i) std::printf(" %.3f", r->at(i));
            std::printf("\n");
        }
        std::printf("auto: the gate measured %.1f tok/s drafting, %.1f plain; it keeps to %s\n", gate_drafting, gate_plain,
                    auto_drafting ? "drafts" : "plain steps");

        // Part 2: the costs, on a state of the GPU model beside the sequence's.
        GpuDecodeState st = g.new_state();
        g.forward(st, tokens(64), false);
        GpuRewindPoint point;
        const std::vector<std::int32_t> one = tokens(1);
        auto timed = [&](auto&& before, auto&& what, auto&& after) {
            std::vector<double> ms;
            for (int r = 0; r < reps + 2; ++r) {  // two warm-up rounds (graph capture)
                before();
                const auto s0 = Clock::now();
                what();
                if (r >= 2) ms.push_back(since(s0) * 1e3);
                after();
            }
            return median(ms);
        };
        auto nothing = [] {};
        auto measure = [&](int layers) {
            g.set_max_layers(layers);
            Costs k;
            k.step = timed(nothing, [&] { g.forward(st, one, false); }, nothing);
            g.set_gemv_calls(true);  // as the loop's calls while it keeps undo records
            for (std::size_t n = 1; n <= kMax + 1; ++n) {
                const std::vector<std::int32_t> t = tokens(n);
                k.call[n] = timed([&] { g.rewind_point(st, int(n), point); }, [&] { g.forward(st, t, n > 1); },
                                  [&] { g.rewind(st, point); });
            }
            k.rewind = timed([&] { g.rewind_point(st, 1, point), g.forward(st, one, false); },
                             [&] { g.rewind(st, point), g.forward(st, one, false); }, nothing) - k.step;
            g.set_gemv_calls(false);
            return k;
        };
        const Costs none = measure(0), all = measure(-1);
        g.set_max_layers(-1);
        // The taps' cost on a verify call (three tap layers at any depth).
        double tap_cost[kMax + 2] = {};
        g.set_taps(true);
        g.set_gemv_calls(true);
        for (std::size_t n = 1; n <= kMax + 1; ++n) {
            const std::vector<std::int32_t> t = tokens(n);
            tap_cost[n] = std::max(0.0, timed([&] { g.rewind_point(st, int(n), point); }, [&] { g.forward(st, t, n > 1); },
                                              [&] { g.rewind(st, point); }) - all.call[n]);
        }
        g.set_gemv_calls(false);
        g.set_taps(false);
        Costs measured = all, flash = all;
        auto extrapolate = [&](double head, double full) { return head + 43.0 * (full - head) / L; };
        flash.step = extrapolate(none.step, all.step);
        flash.rewind = extrapolate(none.rewind, all.rewind);
        for (std::size_t n = 1; n <= kMax + 1; ++n) {
            measured.call[n] += tap_cost[n];
            flash.call[n] = extrapolate(none.call[n], all.call[n]) + tap_cost[n];
        }

        // The stages: their rings filled over a window of random taps, then extend, block, guesses.
        GpuDsparkState ds = g.new_dspark_state(st.position);
        std::normal_distribution<float> unit(0.0f, 1.0f);
        auto random_taps = [&](std::size_t n) {
            std::vector<float> t(n * taps * std::size_t(D));
            for (float& x : t) x = unit(rng);
            return t;
        };
        g.dspark_extend(ds, random_taps(std::size_t(c.sliding_window)));
        double extend[kMax + 2] = {};
        for (std::size_t m = 1; m <= kMax + 1; ++m) {
            const std::vector<float> t = random_taps(m);
            extend[m] = timed(nothing, [&] { g.dspark_extend(ds, t); }, nothing);
        }
        const std::int32_t anchor = one[0];
        const double block = timed(nothing, [&] { g.dspark_block(ds, anchor); }, nothing);
        std::int32_t prev = anchor;
        const double guess = timed(nothing, [&] {
            const std::vector<float> row = g.dspark_guess_logits(ds, 0, prev);
            (void)model->dspark_confidence(g.dspark_y(ds, 0), prev);
            prev = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());
        }, nothing);
        // The drafter's path at temperature 0: the greedy chain of k guesses on the device.
        double chain[kMax + 2] = {};
        for (std::size_t k = 1; k <= kMax; ++k)
            chain[k] = timed(nothing, [&] { (void)g.dspark_greedy(ds, anchor, k); }, nothing);
        std::printf("\npart 2: all resident, median of %d, ms\n%-32s", reps, "");
        for (std::size_t n = 1; n <= kMax + 1; ++n) std::printf(" %8zu", n);
        std::printf("\n");
        auto row = [&](const char* what, const double* v) {
            std::printf("%-32s", what);
            for (std::size_t n = 1; n <= kMax + 1; ++n) std::printf(" %8.3f", v[n]);
            std::printf("\n");
        };
        double singles[kMax + 2], flash_singles[kMax + 2];
        for (std::size_t n = 1; n <= kMax + 1; ++n) singles[n] = double(n) * all.step, flash_singles[n] = double(n) * flash.step;
        row("verify call of n (measured)", measured.call);
        row("n decode steps (measured)", singles);
        row("verify call of n (43 layers)", flash.call);
        row("n decode steps (43 layers)", flash_singles);
        row("taps' share of the call", tap_cost);
        row("ring extend over n positions", extend);
        row("greedy chain of n guesses", chain);
        std::printf("decode step %.3f ms measured, %.3f ms at 43 layers; rewind %.3f / %.3f ms; draft block %.3f ms; "
                    "a guess on the host path (row to host, argmax, confidence; not the drafter's greedy path) %.3f ms\n",
                    all.step, flash.step, all.rewind, flash.rewind, block, guess);

        // Part 3: tok/s by k at the measured and an assumed acceptance; the break-even q.
        struct Figure {
            std::string label;
            double speedup = 0, bound = 0;
            std::size_t k = 0;
        };
        std::vector<Figure> figures;
        const double q = 0.8;
        for (const Costs* costs : {static_cast<const Costs*>(&measured), static_cast<const Costs*>(&flash)}) {
            const bool is_flash = costs == &flash;
            const double plain_rate = 1e3 / costs->step;
            std::printf("\n%s: plain %.1f tok/s\n", is_flash ? "43 layers" : "measured", plain_rate);
            for (int which = 0; which < 2; ++which) {
                const std::vector<double> acc_by_pos = which == 0 ? a : geometric(q);
                std::printf(" %s:", which == 0 ? "measured acceptance (random weights)" : "ASSUMED geometric acceptance q = 0.8");
                for (double v : acc_by_pos) std::printf(" %.3f", v);
                std::printf("\n");
                Figure best{std::string(is_flash ? "43 layers" : "measured") + ", " +
                            (which == 0 ? "measured acceptance" : "assumed q = 0.8")};
                for (std::size_t k = 1; k <= kMax; ++k) {
                    const double proposal = block + chain[k];
                    const Cycle cy = cycle(*costs, extend, proposal, k, profile_of(acc_by_pos, k));
                    const double rate = cy.tokens * 1e3 / cy.ms, bound = cy.tokens * costs->step / costs->call[k + 1];
                    std::printf("  k=%zu: %.2f tokens a verify call, %.3f ms a cycle (draft %.3f), %.1f tok/s, speed-up "
                                "%.2fx (bound %.2fx)\n",
                                k, cy.tokens, cy.ms, proposal, rate, rate / plain_rate, bound);
                    if (best.k == 0 || rate / plain_rate > best.speedup) best.speedup = rate / plain_rate, best.bound = bound, best.k = k;
                }
                figures.push_back(best);
            }
            // Break-even: the lowest q at which drafting k pays (speed-up grows with q).
            std::printf(" break-even per-position acceptance q (geometric a_i = q^i):");
            for (std::size_t k = 1; k <= kMax; ++k) {
                const double proposal = block + chain[k];
                auto speedup = [&](double x) {
                    const Cycle cy = cycle(*costs, extend, proposal, k, profile_of(geometric(x), k));
                    return cy.tokens * costs->step / cy.ms;
                };
                if (speedup(1.0) <= 1.0) {
                    std::printf(" k=%zu never", k);
                    continue;
                }
                double lo = 0, hi = 1;
                for (int it = 0; it < 40; ++it) (speedup((lo + hi) / 2) > 1.0 ? hi : lo) = (lo + hi) / 2;
                std::printf(" k=%zu %.3f", k, hi);
            }
            std::printf("\n");
        }
        std::printf("\n");
        for (const Figure& f : figures)
            std::printf("figure (%s): V4-Flash-0731 geometry, DSpark drafts: best k=%zu, %.2fx the tokens a second "
                        "without drafts, net of drafting, verify, extend and replay; bound %.2fx\n",
                        f.label.c_str(), f.k, f.speedup, f.bound);
        std::printf("auto at the measured acceptance (random weights, %.3f at position 1): %s\n", a[0],
                    auto_drafting ? "keeps to drafts" : "keeps to plain steps");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dspark_gpu_bench: %s\n", e.what());
        return 1;
    }
}
#endif
