// Device test of the sampled draft chains (kernels/sample_rows.hpp): at temperature > 0 the
// guesses of MTP (GpuModel::mtp_draft_sampled, MtpRunner::sampled_chain) and of DSpark's
// device stages (GpuModel::dspark_sampled, DsparkRunner::sampled) are drawn on the device,
// one copy of ids and q rows a proposal.
//   chain: against the same model's steps run one by one with the rows on the host and the
//     host's account of the draw (tests/common/tempered_draw.hpp) on the same uniforms, each
//     step fed the device's previous guess: ids equal but within rounding of a running-sum
//     boundary, q rows the host's softmax of the same logits; MTP: the ring and position after
//     bit for bit the stepwise path's, k = 1 and 4, two temperatures, two models; DSpark: the
//     confidences the stepwise ones, all γ guesses, two temperatures.
//   generation: sampled generation with device-drawn drafts (MTP on the trained model,
//     DSpark on a random checkpoint) repeats itself for the same seed; MTP's accepts drafts;
//     the entries' bounds are usage errors.
// That the output keeps the trunk's distribution for a q that is the one drawn from is the
// loop's (tests/unit/runtime/mtp_drafter_test.cpp's chi-square test).
#include "device_test.hpp"
#include "mtp_run.hpp"
#include "wide_container.hpp"
#include "../common/random_dspark_checkpoint.hpp"
#include "../common/dspark_helpers.hpp"
#include "../common/tempered_draw.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

void chain_vs_steps(const std::string& name, const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const int V = cpu.config().vocab_size, n = 9;
    aff::gpu::GpuModel g(cpu, &ck, aff::gpu::GpuOptions{});
    const std::vector<std::int32_t> toks = random_tokens(n + 1, V);
    const std::span<const std::int32_t> next = std::span(toks).subspan(1, std::size_t(n));
    for (const std::size_t k : {std::size_t(1), std::size_t(4)})
        for (const float t : {0.7f, 1.3f}) {
            const std::string what = name + " k=" + std::to_string(k) + " T " + std::to_string(t).substr(0, 3);
            std::vector<double> u(k);  // values a float holds exactly: the device's draws are floats
            for (std::size_t j = 0; j < k; ++j) u[j] = double(float((double(j) + 0.61) / double(k + 1)));
            // The chain on the device.
            aff::gpu::GpuDecodeState sa = g.new_state(), ma = g.new_mtp_state();
            g.forward(sa, std::span(toks).first(std::size_t(n)), true);
            g.keep_streams(ma, 0, 0, n);
            std::vector<float> q;
            const std::vector<std::int32_t> ids = g.mtp_draft_sampled(ma, next, k, t, u, &q);
            // The same steps one by one, drawn on the host, each fed the device's guess.
            aff::gpu::GpuDecodeState sb = g.new_state(), mb = g.new_mtp_state();
            g.forward(sb, std::span(toks).first(std::size_t(n)), true);
            g.keep_streams(mb, 0, 0, n);
            std::size_t unexplained = 0, zero_mass = 0;
            double worst = 0;
            auto check = [&](const std::vector<float>& logits, std::size_t j) {
                const std::vector<double> want_q = aff::test::tempered_softmax(logits, t);
                double margin = 0;
                const std::int32_t want = aff::test::tempered_draw(want_q, double(u[j]), &margin);
                if (j >= ids.size() || ids[j] < 0 || ids[j] >= V || want_q[std::size_t(ids[j])] <= 0) {
                    ++zero_mass;
                    return;
                }
                if (ids[j] != want && margin > 1e-5) ++unexplained;
                if (q.size() != k * std::size_t(V)) return;
                std::vector<float> got(q.begin() + std::ptrdiff_t(j * V), q.begin() + std::ptrdiff_t((j + 1) * V)),
                    wq(want_q.begin(), want_q.end());
                worst = std::max(worst, nmse(got, wq));
            };
            check(g.mtp_forward(mb, next, aff::gpu::MtpInput::trunk), 0);
            const std::int64_t after = mb.mtp_position;
            if (k > 1) {
                g.mtp_save_ring(mb);
                for (std::size_t j = 1; j < k && j < ids.size(); ++j) {
                    const std::int32_t one[1] = {ids[j - 1]};
                    check(g.mtp_forward(mb, one, aff::gpu::MtpInput::own), j);
                }
                g.mtp_restore_ring(mb, after);
            }
            add(rows, "sampled_chain", what + ": device draws other than the host's away from a boundary",
                ids.size() == k ? double(unexplained) : 1e9, 0.0);
            add(rows, "sampled_chain", what + ": draws of q 0 or out of range", double(zero_mass), 0.0);
            add(rows, "sampled_chain", what + ": q rows vs the host's softmax of the same logits (worst NMSE)",
                q.size() == k * std::size_t(V) ? worst : 1e9, 1e-10);
            add(rows, "sampled_chain", what + ": MTP position and ring after, chain vs steps (floats differing)",
                ma.mtp_position == mb.mtp_position ? double(differing(g.mtp_ring(ma), g.mtp_ring(mb))) : 1e9, 0.0);
        }
    aff::gpu::GpuDecodeState m = g.new_mtp_state();
    const std::int32_t one[1] = {1};
    std::vector<float> q;
    const std::vector<double> half{0.5}, two{0.5, 0.5}, whole{1.0};
    add(rows, "sampled_chain", name + ": temperature 0, draws not one a guess, a draw of 1: usage errors",
        usage_error([&] { g.mtp_draft_sampled(m, one, 1, 0.0f, half, &q); }) +
            usage_error([&] { g.mtp_draft_sampled(m, one, 1, 1.0f, two, &q); }) +
            usage_error([&] { g.mtp_draft_sampled(m, one, 1, 1.0f, whole, &q); }),
        0.0);
}

// A sampled generation on a fresh GPU sequence with the drafter `make` builds on it.
template <class Make>
std::vector<std::int32_t> sampled_generation(const aff::Model& cpu, const aff::Checkpoint& ck,
                                             const aff::GenerateOptions& opt, Make make, aff::GenerateStats& stats) {
    auto seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
    auto drafter = make(*seq);
    std::vector<std::int32_t> tokens;
    aff::GenerateHooks h;
    h.on_step = [&](const aff::GenerationStep& s) {
        tokens.push_back(s.token);
        return true;
    };
    h.drafter = drafter.get();
    stats = aff::generate(*seq, opt, h);
    return tokens;
}

// DSpark's device chain against its steps: the block, then each guess's corrected row and
// confidence through the runner's one-row calls, fed the device's previous guess.
void dspark_chain_vs_steps(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const int V = c.vocab_size;
    const std::size_t g = std::size_t(c.dspark.block_size);
    auto seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
    std::string why;
    std::unique_ptr<aff::DsparkRunner> runner = aff::make_gpu_dspark_runner(cpu, *seq, why);
    if (!runner) {
        rows.push_back({"sampled_chain", "no GPU DSpark runner: " + why, INFINITY, 0.0, false});
        return;
    }
    const std::vector<std::int32_t> toks = random_tokens(22, V);
    {
        aff::test::RingFeed feed(*runner);
        seq->forward(toks, false);
    }
    for (const float t : {0.7f, 1.3f}) {
        const std::string what = "DSpark (" + runner->stages() + ") T " + std::to_string(t).substr(0, 3);
        std::vector<double> u(g);
        for (std::size_t j = 0; j < g; ++j) u[j] = (double(j) + 0.43) / double(g + 1);
        const std::int32_t anchor = toks.back();
        runner->block(anchor);
        std::vector<std::int32_t> ids;
        std::vector<float> conf, q;
        const bool ran = runner->sampled(anchor, g, t, u, ids, conf, &q);
        if (!ran || ids.size() != g || conf.size() != g || q.size() != g * std::size_t(V)) {
            add(rows, "sampled_chain", what + ": the device stages' sampled chain ran, all its rows back", 1.0, 0.0);
            continue;
        }
        std::size_t unexplained = 0, zero_mass = 0;
        double worst_q = 0, worst_c = 0;
        std::int32_t prev = anchor;
        for (std::size_t i = 0; i < g; ++i) {
            const std::vector<double> want_q = aff::test::tempered_softmax(runner->guess_logits(i, prev), t);
            double margin = 0;
            const std::int32_t want = aff::test::tempered_draw(want_q, double(float(u[i])), &margin);
            if (ids[i] < 0 || ids[i] >= V || want_q[std::size_t(ids[i])] <= 0) ++zero_mass;
            else if (ids[i] != want && margin > 1e-5) ++unexplained;
            std::vector<float> got(q.begin() + std::ptrdiff_t(i * V), q.begin() + std::ptrdiff_t((i + 1) * V)),
                wq(want_q.begin(), want_q.end());
            worst_q = std::max(worst_q, nmse(got, wq));
            worst_c = std::max(worst_c, std::fabs(double(conf[i]) - runner->confidence(i, prev)));
            prev = ids[i];
        }
        add(rows, "sampled_chain", what + ": device draws other than the host's away from a boundary",
            double(unexplained), 0.0);
        add(rows, "sampled_chain", what + ": draws of q 0 or out of range", double(zero_mass), 0.0);
        add(rows, "sampled_chain", what + ": q rows vs the host's softmax of the stepwise rows (worst NMSE)", worst_q,
            1e-10);
        add(rows, "sampled_chain", what + ": confidences vs the stepwise ones (worst abs diff)", worst_c, 1e-5);
    }
}

}  // namespace

AFF_DEVICE_TEST("sampled_chain") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a-fp8", "tiny-trained"}) {
        try {
            const std::string dir = test_data() + "/models/" + name;
            auto cpu = aff::Model::load(dir, pool);
            const aff::Checkpoint ck(dir);
            chain_vs_steps(name, *cpu, ck, rows);
            if (std::string(name) != "tiny-trained") continue;
            aff::GenerateOptions opt;
            opt.prompt = random_tokens(12, cpu->config().vocab_size);
            opt.max_new_tokens = 48;
            opt.sampling.temperature = 0.8f;
            opt.sampling.seed = 5;
            for (const std::size_t k : {std::size_t(1), std::size_t(3)}) {
                aff::GenerateStats a, b;
                auto make = [k](aff::Sequence& seq) { return gpu_drafter(seq, k); };
                const std::vector<std::int32_t> first = sampled_generation(*cpu, ck, opt, make, a);
                const std::vector<std::int32_t> again = sampled_generation(*cpu, ck, opt, make, b);
                const std::string what = std::string(name) + " T 0.8 k=" + std::to_string(k) + " (" +
                                         std::to_string(a.verify_calls) + " verify calls, " +
                                         std::to_string(a.accepted_tokens) + " of " + std::to_string(a.drafted_tokens) +
                                         " accepted)";
                add(rows, "sampled_chain", what + ": drafts accepted", a.accepted_tokens > 0 ? 0.0 : 1.0, 0.0);
                add(rows, "sampled_chain", what + ": the same seed again, tokens differing",
                    first.size() == 48 && first == again ? 0.0 : 1.0, 0.0);
            }
        } catch (const std::exception& e) {
            rows.push_back({"sampled_chain", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    TempDir tmp("sampled-chain");
    const std::string dir = tmp / "tiny-dspark";
    try {
        aff::test::write_random_dspark_checkpoint(dir, 3);
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        dspark_chain_vs_steps(*cpu, ck, rows);
        aff::GenerateOptions opt;
        opt.prompt = random_tokens(12, cpu->config().vocab_size);
        opt.max_new_tokens = 32;
        opt.sampling.temperature = 0.9f;
        opt.sampling.seed = 8;
        auto make = [&](aff::Sequence& seq) {
            std::string why;
            auto runner = aff::make_gpu_dspark_runner(*cpu, seq, why);
            if (!runner) throw aff::Error(aff::ErrorKind::unsupported, "no GPU DSpark runner: " + why);
            return std::make_unique<aff::DsparkDrafter>(std::move(runner), 3, 0.0f);
        };
        aff::GenerateStats a, b;
        const std::vector<std::int32_t> first = sampled_generation(*cpu, ck, opt, make, a);
        const std::vector<std::int32_t> again = sampled_generation(*cpu, ck, opt, make, b);
        add(rows, "sampled_chain",
            "DSpark T 0.9 k=3 (" + std::to_string(a.verify_calls) + " verify calls, " + std::to_string(a.drafted_tokens) +
                " drafted): the same seed again, tokens differing",
            first.size() == 32 && first == again && a.drafted_tokens > 0 ? 0.0 : 1.0, 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"sampled_chain", std::string("DSpark threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
