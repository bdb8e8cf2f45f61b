// Speculative decoding with the MTP layer's drafts on the CPU reference (issue 18): how often
// the drafts hold on held-out text, and what that buys in tokens a second, net of the drafts'
// own cost. Input: a model with an MTP layer (the trained tiny model) and the results.json
// export_tiny.py wrote beside it, whose eval_windows are the held-out token windows.
//   1. Teacher-forced, as export_tiny.py scored it with transformers (RESULTS.md: 0.713 bf16,
//      0.708 dequantised): over every position p of each window, does the MTP argmax from
//      (trunk streams at p, text token p+1) equal the trunk's argmax at p+1?
//   2. Generation: each window's first PROMPT tokens as the prompt, GEN greedy tokens without
//      drafts and with drafts of up to k = 1 .. KMAX tokens: the outputs must be identical
//      (the bench fails otherwise), then mean accepted drafts per verify call and acceptance
//      by position, decode tok/s with and without drafts (over the CPU time of the whole
//      decode, drafting included: run it with THREADS=1 so that the CPU time is the run's
//      own on a machine other jobs share), the drafts' own share of it, and the bound on the speed-up (tokens
//      a verify call: what drafting would give if a verify call cost one decode step and
//      drafting nothing). Then --draft auto's row (the gate drafts only while it measures
//      drafting faster), and a table at temperature 1 (speculative sampling). Each
//      configuration keeps its sequence and drafter over the windows, as a server does, and
//      the configurations take turns window by window.
//     mtp_draft_bench MODEL RESULTS_JSON [WINDOWS=8] [PROMPT=64] [GEN=96] [KMAX=4] [THREADS=1]
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/draft_gate.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/mtp_drafter.hpp"
#include "timed_drafter.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

// Seconds of CPU time this process has used: on a machine shared with other jobs the wall
// clock measures them too, the CPU time of a one-thread run only this one.
double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

using TimedDrafter = aff::bench::TimedDrafter;

std::int32_t argmax(const float* row, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (row[i] > row[best]) best = i;
    return best;
}

struct Totals {
    std::size_t tokens = 0, forwards = 0, verify_calls = 0, drafted = 0, accepted = 0;
    std::vector<std::size_t> drafted_at, accepted_at;
    double decode_seconds = 0, draft_seconds = 0;
    void add(const aff::GenerateStats& s, double decode_cpu_s, double draft_s) {
        // The first token comes from the prefill; the decode time covers the rest.
        tokens += s.generated_tokens - 1;
        forwards += s.decode_forwards;
        verify_calls += s.verify_calls;
        drafted += s.drafted_tokens;
        accepted += s.accepted_tokens;
        if (drafted_at.size() < s.drafted_at.size()) {
            drafted_at.resize(s.drafted_at.size(), 0);
            accepted_at.resize(s.drafted_at.size(), 0);
        }
        for (std::size_t i = 0; i < s.drafted_at.size(); ++i) {
            drafted_at[i] += s.drafted_at[i];
            accepted_at[i] += s.accepted_at[i];
        }
        decode_seconds += decode_cpu_s;
        draft_seconds += draft_s;
    }
    double rate() const { return decode_seconds > 0 ? double(tokens) / decode_seconds : 0; }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: mtp_draft_bench MODEL RESULTS_JSON [WINDOWS] [PROMPT] [GEN] [KMAX] [THREADS]\n");
        return 2;
    }
    auto arg = [&](int i, long dflt) { return argc > i ? std::strtol(argv[i], nullptr, 10) : dflt; };
    const std::size_t windows = std::size_t(arg(3, 8)), prompt_len = std::size_t(arg(4, 64)), gen = std::size_t(arg(5, 96)),
                      kmax = std::size_t(arg(6, 4)), threads = std::size_t(arg(7, 1));
    try {
        std::ifstream in(argv[2]);
        if (!in) throw std::runtime_error(std::string("cannot open ") + argv[2]);
        const nlohmann::json results = nlohmann::json::parse(in);
        const auto& all_windows = results.at("eval_windows");
        const std::size_t n_windows = std::min(windows, all_windows.size());
        aff::ThreadPool pool(threads);
        auto model = aff::Model::load(argv[1], pool);
        if (!model->has_mtp()) throw std::runtime_error("the model has no MTP layer");
        const int V = model->config().vocab_size;
        std::printf("mtp_draft_bench: %s, %zu held-out windows, %zu threads\n", argv[1], n_windows, pool.size());

        // 1. Teacher-forced acceptance over whole windows.
        std::size_t hits = 0, positions = 0;
        for (std::size_t w = 0; w < n_windows; ++w) {
            const std::vector<std::int32_t> tokens = all_windows[w].get<std::vector<std::int32_t>>();
            const std::size_t S = tokens.size() - 1;  // as export_tiny.py: the window's last token is only a target
            aff::DecodeState st = model->new_state();
            std::vector<float> streams;
            const std::vector<float> trunk = model->forward(st, std::span(tokens).first(S), true, &streams);
            const std::size_t row = streams.size() / S;
            const std::vector<float> mtp =
                model->mtp_forward(st, std::span(streams).first((S - 1) * row), std::span(tokens).subspan(1, S - 1));
            for (std::size_t p = 0; p + 1 < S; ++p) {
                hits += argmax(&mtp[p * V], V) == argmax(&trunk[(p + 1) * V], V);
                ++positions;
            }
        }
        std::printf("teacher-forced greedy acceptance: %.4f over %zu positions (transformers on the same windows: "
                    "0.713 bf16, 0.708 dequantised)\n",
                    double(hits) / double(positions), positions);

        // 2. Generation with and without drafts. Every configuration keeps one sequence and
        // one drafter over all windows (as a server keeps them), and the configurations take
        // turns window by window, so that a change in the machine's load falls on all alike.
        struct Config {
            std::string label;
            std::size_t k = 0;
            bool gated = false;
            float temperature = 0;
            std::unique_ptr<aff::CpuSequence> seq;
            std::unique_ptr<aff::Drafter> drafter;
            std::unique_ptr<TimedDrafter> timed;
            Totals t;
        };
        std::vector<Config> configs;
        auto add = [&](std::string label, std::size_t k, bool gated, float temperature) {
            Config& c = configs.emplace_back();
            c.label = std::move(label);
            c.k = k;
            c.gated = gated;
            c.temperature = temperature;
            c.seq = std::make_unique<aff::CpuSequence>(*model);
            if (k > 0) {
                c.drafter = std::make_unique<aff::MtpDrafter>(*model, *c.seq, k);
                if (gated) c.drafter = std::make_unique<aff::DraftGate>(std::move(c.drafter));
                c.timed = std::make_unique<TimedDrafter>(*c.drafter, cpu_seconds);
            }
        };
        add("off", 0, false, 0.0f);
        for (std::size_t k = 1; k <= kmax; ++k) add("mtp k=" + std::to_string(k), k, false, 0.0f);
        const std::size_t k_auto = std::min<std::size_t>(kmax, 3);
        add("auto", k_auto, true, 0.0f);
        add("off", 0, false, 1.0f);
        add("mtp k=" + std::to_string(k_auto), k_auto, false, 1.0f);
        for (std::size_t w = 0; w < n_windows; ++w) {
            const std::vector<std::int32_t> tokens = all_windows[w].get<std::vector<std::int32_t>>();
            std::vector<std::int32_t> greedy;
            for (Config& c : configs) {
                c.seq->reset();
                aff::GenerateOptions opt;
                opt.prompt.assign(tokens.begin(), tokens.begin() + std::ptrdiff_t(std::min(prompt_len, tokens.size())));
                opt.max_new_tokens = gen;
                opt.sampling.temperature = c.temperature;
                opt.sampling.seed = w;
                std::vector<std::int32_t> out;
                aff::GenerateHooks h;
                double decode_start = 0;  // CPU time at the first token, the end of the prefill
                h.on_step = [&](const aff::GenerationStep& s) {
                    if (out.empty()) decode_start = cpu_seconds();
                    out.push_back(s.token);
                    return true;
                };
                h.drafter = c.timed.get();
                const double draft_before = c.timed ? c.timed->seconds : 0.0;
                const aff::GenerateStats s = aff::generate(*c.seq, opt, h);
                c.t.add(s, cpu_seconds() - decode_start, c.timed ? c.timed->seconds - draft_before : 0.0);
                if (c.temperature == 0.0f) {
                    if (c.k == 0) greedy = out;
                    else if (greedy != out)
                        throw std::runtime_error("window " + std::to_string(w) + ": greedy output with " + c.label +
                                                 " differs from the output without drafts");
                }
            }
        }
        auto print_table = [&](float temperature) {
            const Totals* plain = nullptr;
            std::printf("%-8s %9s %9s %26s %9s %9s %8s %8s\n", "drafts", "tok/s", "speed-up", "accepted/verify (bound)",
                        "draft %", "verify", "calls", "by position");
            for (const Config& c : configs) {
                if (c.temperature != temperature) continue;
                const Totals& t = c.t;
                if (c.k == 0) {
                    plain = &t;
                    std::printf("%-8s %9.1f %9s %26s %9s %9s %8zu\n", c.label.c_str(), t.rate(), "1.00", "-", "-", "-",
                                t.forwards);
                    continue;
                }
                const double mean = t.verify_calls ? double(t.accepted) / double(t.verify_calls) : 0.0;
                char accepted[64];
                std::snprintf(accepted, sizeof accepted, "%.3f (bound %.2fx)", mean, mean + 1.0);
                std::printf("%-8s %9.1f %8.2fx %26s %8.1f%% %9zu %8zu ", c.label.c_str(), t.rate(),
                            plain ? t.rate() / plain->rate() : 0.0, accepted, 100.0 * t.draft_seconds / t.decode_seconds,
                            t.verify_calls, t.forwards);
                for (std::size_t i = 0; i < t.drafted_at.size(); ++i)
                    std::printf(" %.3f", t.drafted_at[i] ? double(t.accepted_at[i]) / double(t.drafted_at[i]) : 0.0);
                std::printf("\n");
            }
        };
        std::printf("\ngreedy, prompt %zu tokens, %zu generated a window\n", prompt_len, gen);
        print_table(0.0f);
        std::printf("greedy outputs with drafts: identical to those without for every k and auto\n");
        std::printf("\ntemperature 1 (speculative sampling)\n");
        print_table(1.0f);
        (void)V;
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mtp_draft_bench: %s\n", e.what());
        return 1;
    }
}
