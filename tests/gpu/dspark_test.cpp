// Device test of DSpark drafts on a GPU trunk (libaff/gpu/forward_taps.cpp: the trunk's tap
// features; libaff/gpu/forward_dspark.cpp: the stages on the device; libaff/runtime/
// gpu_dspark_runner.hpp under DsparkDrafter: the device runner, or the host-stage runner fed
// by the GPU taps), on the random checkpoint with DSpark stages that the CPU tests use
// (tests/common/random_dspark_checkpoint.hpp: 6 layers, taps after the last three, 3 stages,
// γ 5), written here:
//   - taps: GpuModel::last_taps after a prompt (GEMV path: gemm_min_tokens 0), a 3-token call
//     and two single steps (decode-sized calls: the tap layer's last expand is pending there)
//     against the CPU forward's DecodeState::taps, within kTapMaxNmse (the trunk's 1e-9);
//   - the trunk's logits with taps on are those with taps off, floats differing: 0 (the same
//     calls on two states of one model, taps switched on between them);
//   - rings and block, for each runner (device stages; host stages, asked for): the runner
//     fed every call's GPU taps against the CPU stages fed the same taps: each stage's ring,
//     then the block's Markov-corrected logits of all γ guesses and their confidences, within
//     kStageMaxNmse (the stages' own fp32 sums: GEMVs, attention's block mode, mHC, in other
//     orders than the CPU's);
//   - greedy generation with device-stage DSpark drafts (every call on the GEMVs; k = 1..5,
//     every guess verified: min_survival 0; the drafter's guesses, and the known continuation
//     for some of them so that prefixes of every length are kept) gives the tokens of
//     generation without, token for token, and the logits within kVerifyMaxNmse of the single
//     steps'; after it, the drafter's rings are a fresh CPU build's over the trunk's positions
//     within kStageMaxNmse; the same once with host stages (k = 3: the fallback path);
//   - the greedy chain on the device (device_chain) against the per-guess calls with host
//     picks on the same stages: ids equal, confidences within kConfidenceMaxDiff, proposals in
//     generation equal, tokens those without drafts, rings after equal bit for bit;
//   - a codebook-stored model (the wide geometry with DSpark stages, quantised with its draft
//     container): the stages on the device, their experts in VRAM and, on a tiered trunk (two
//     slab slots), in RAM and in VRAM: greedy tokens with drafts those of the resident trunk
//     without, and the start-up line and the runner's line say where the experts are;
//   - refusals and fallbacks: a model without DSpark stages gets no GPU runner (why_not says
//     so); --draft-placement with the stages on the host is refused with one reason, and
//     accepted with them on the device.
#include "device_test.hpp"
#include "recording_drafter.hpp"
#include "wide_container.hpp"

#include "../common/dspark_helpers.hpp"
#include "../common/random_dspark_checkpoint.hpp"
#include "../unit/runtime/generate_outcome.hpp"
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/draft_load.hpp"
#include "libaff/quant/quantize_model.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/progress.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/draft_sampling.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr double kTapMaxNmse = 1e-9;     // the trunk's streams, GEMV path: fp32 orders only
constexpr double kStageMaxNmse = 1e-8;   // the stages' own fp32 sums over the same taps
constexpr double kVerifyMaxNmse = 1e-9;  // a verify call's rows against single steps

// Every call on the GEMVs (fp32 activations, as the CPU's): the prompts' taps then hold to the
// trunk's 1e-9 too, not to the prefill GEMMs' bf16 rounding.
aff::gpu::GpuOptions gemv_options() {
    aff::gpu::GpuOptions o;
    o.gemm_min_tokens = 0;
    return o;
}

// taps [n, taps, D] of the CPU trunk for `tokens` at st's position.
std::vector<float> cpu_taps(const aff::Model& cpu, aff::DecodeState& st, std::span<const std::int32_t> tokens) {
    std::vector<float> taps;
    st.taps = &taps;
    cpu.forward(st, tokens, false);
    st.taps = nullptr;
    return taps;
}

void check_taps(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    aff::gpu::GpuModel g(cpu, &ck, gemv_options());
    const std::vector<std::int32_t> toks = random_tokens(17, c.vocab_size);
    const std::vector<std::span<const std::int32_t>> calls = {std::span(toks).first(12), std::span(toks).subspan(12, 3),
                                                              std::span(toks).subspan(15, 1), std::span(toks).subspan(16, 1)};
    // Taps off, then on, on two states of one model: the logits must not move.
    aff::gpu::GpuDecodeState off = g.new_state(), on = g.new_state();
    std::vector<std::vector<float>> logits_off;
    for (auto call : calls) logits_off.push_back(g.forward(off, call, true));
    g.set_taps(true);
    aff::DecodeState cs = cpu.new_state();
    long long moved = 0;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        const std::vector<float> l = g.forward(on, calls[i], true);
        moved += differing(l, logits_off[i]);
        const std::vector<float> want = cpu_taps(cpu, cs, calls[i]);
        const std::vector<float> got(g.last_taps().begin(), g.last_taps().end());
        add(rows, "dspark", "taps of a call of " + std::to_string(calls[i].size()) + " tokens at " +
                                std::to_string(on.position - std::int64_t(calls[i].size())) + " vs the CPU forward's",
            nmse(got, want), kTapMaxNmse);
    }
    add(rows, "dspark", "trunk logits with taps on vs off, floats differing", double(moved), 0.0);
    g.set_taps(false);
    add(rows, "dspark", "taps off again: last_taps empty", g.last_taps().empty() ? 0.0 : 1.0, 0.0);

    // Taps switched off and on between decode steps (a DSpark drafter's listening, DraftGate's
    // plain runs): the steps with taps on give the CPU's taps, every step the logits of the
    // same step on the state that ran the first calls with taps off, the steps off no taps,
    // and once each kind of decode graph exists switching captures none (the graphs' key says
    // whether taps were on).
    const bool pattern[] = {false, false, true, true, false, true, false, true, false, true};
    const std::vector<std::int32_t> more = random_tokens(std::size(pattern), c.vocab_size);
    double worst = 0;
    long long moved_steps = 0;
    std::size_t captures_then = 0;
    for (std::size_t i = 0; i < std::size(pattern); ++i) {
        const std::span<const std::int32_t> tok = std::span(more).subspan(i, 1);
        g.set_taps(pattern[i]);
        const std::vector<float> plain = g.forward(off, tok, true);
        const std::vector<float> l = g.forward(on, tok, true);
        moved_steps += differing(l, plain);
        const std::vector<float> want = cpu_taps(cpu, cs, tok);
        if (pattern[i]) worst = std::max(worst, nmse(std::vector<float>(g.last_taps().begin(), g.last_taps().end()), want));
        else moved_steps += g.last_taps().empty() ? 0 : 1;
        if (i == 2) captures_then = g.graphs_captured();
    }
    add(rows, "dspark", "taps switched off and on between steps: worst taps vs the CPU forward's", worst, kTapMaxNmse);
    add(rows, "dspark", "taps switched off and on: logits vs a state without taps, floats differing (+1 a step off with taps)",
        double(moved_steps), 0.0);
    add(rows, "dspark", "taps switched off and on: decode graphs captured once both kinds existed",
        double(g.graphs_captured() - captures_then), 0.0);
    add(rows, "dspark", "taps switched off and on: the steps ran as decode graphs (none captured: 1)",
        captures_then > 0 ? 0.0 : 1.0, 0.0);
    g.set_taps(false);
}

const char* where_name(aff::DsparkStages where) {
    return where == aff::DsparkStages::host ? "host stages" : "device stages";
}

// The runner's stages() line: the device's names the GPU, the host's says it was asked for.
bool says_where(const aff::DsparkRunner& r, aff::DsparkStages where) {
    return r.stages().find(where == aff::DsparkStages::host ? "stages on the CPU (asked for)" : "stages on the GPU") == 0;
}

void check_stages(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows, aff::DsparkStages where) {
    const aff::ModelConfig& c = cpu.config();
    const int V = c.vocab_size, g = c.dspark.block_size;
    const std::string who = where_name(where);
    auto seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
    std::string why;
    std::unique_ptr<aff::DsparkRunner> runner = aff::make_gpu_dspark_runner(cpu, *seq, why, where);
    if (!runner) {
        rows.push_back({"dspark", who + ": no GPU DSpark runner: " + why, INFINITY, 0.0, false});
        return;
    }
    add(rows, "dspark", who + ": the runner says where (" + runner->stages() + ")", says_where(*runner, where) ? 0.0 : 1.0,
        0.0);
    const std::vector<std::int32_t> toks = random_tokens(22, V);
    aff::DsparkState want = cpu.new_dspark_state();
    {
        aff::test::RingFeed feed(*runner, &cpu, &want);  // the CPU stages get the same GPU taps
        for (auto call : {std::span(toks).first(20), std::span(toks).subspan(20, 1), std::span(toks).subspan(21, 1)})
            seq->forward(call, false);
    }
    add(rows, "dspark", who + ": rings' position " + std::to_string(runner->position()) + " (want 22)",
        runner->position() == 22 && want.position == 22 ? 0.0 : 1.0, 0.0);
    for (std::size_t s = 0; s < want.stages.size(); ++s)
        add(rows, "dspark", who + ": stage " + std::to_string(s) + " ring after 22 positions vs the CPU's on the same taps",
            nmse(runner->ring(s), want.stages[s].ring), kStageMaxNmse);
    const std::int32_t anchor = toks.back();
    runner->block(anchor);
    aff::DsparkBlock block = cpu.dspark_block(want, anchor);
    std::int32_t prev = anchor;
    for (int i = 0; i < g; ++i) {
        std::vector<float> row(block.logits.begin() + std::ptrdiff_t(i) * V, block.logits.begin() + std::ptrdiff_t(i + 1) * V);
        cpu.dspark_markov(prev, row);
        const float cw = cpu.dspark_confidence(std::span<const float>(block.y).subspan(std::size_t(i) * c.hidden_size,
                                                                                     std::size_t(c.hidden_size)),
                                               prev);
        const float cg = runner->confidence(std::size_t(i), prev);
        add(rows, "dspark", who + ": block guess " + std::to_string(i) + ": Markov-corrected logits vs the CPU's",
            nmse(runner->guess_logits(std::size_t(i), prev), row), kStageMaxNmse);
        add(rows, "dspark", who + ": block guess " + std::to_string(i) + ": confidence vs the CPU's (abs diff)",
            std::fabs(double(cg) - cw), 1e-5);
        prev = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    }
    // The block leaves the rings as they were (its keys are guesses).
    double moved = 0;
    for (std::size_t s = 0; s < want.stages.size(); ++s)
        moved = std::max(moved, nmse(runner->ring(s), want.stages[s].ring));
    add(rows, "dspark", who + ": rings after the block vs before (worst stage, nmse vs the CPU's)", moved, kStageMaxNmse);
}

using aff::test::generate_on;
using aff::test::Outcome;
using aff::test::Prompted;  // the known continuation for some guesses: prefixes of every length kept

void greedy_identity(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows, aff::DsparkStages where,
                     std::initializer_list<std::size_t> ks) {
    const int V = cpu.config().vocab_size;
    const std::string who = where_name(where);
    aff::GenerateOptions opt;
    opt.prompt = random_tokens(14, V);
    opt.max_new_tokens = 30;
    opt.sampling.temperature = 0;
    auto plain_seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
    const Outcome plain = generate_on(*plain_seq, opt, nullptr);
    for (std::size_t k : ks) {
        auto seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
        std::string why;
        auto runner = aff::make_gpu_dspark_runner(cpu, *seq, why, where);
        if (!runner) {
            rows.push_back({"dspark", who + ": no GPU DSpark runner: " + why, INFINITY, 0.0, false});
            return;
        }
        aff::DsparkDrafter dspark(std::move(runner), k, 0.0f);
        Prompted prompted(dspark, plain.tokens, opt.prompt.size());
        const Outcome drafted = generate_on(*seq, opt, &prompted);
        long long diff = drafted.tokens.size() == plain.tokens.size() ? 0 : 1000;
        for (std::size_t i = 0; i < std::min(drafted.tokens.size(), plain.tokens.size()); ++i)
            diff += drafted.tokens[i] != plain.tokens[i];
        const std::string what = who + ", k=" + std::to_string(k);
        char acc[96];
        std::snprintf(acc, sizeof acc, " (%zu verify calls, %zu of %zu drafts accepted)", drafted.stats.verify_calls,
                      drafted.stats.accepted_tokens, drafted.stats.drafted_tokens);
        add(rows, "dspark", what + ": greedy tokens with GPU DSpark drafts vs without, differing" + acc, double(diff), 0.0);
        double worst = 0;
        for (std::size_t i = 0; i < std::min(drafted.logits.size(), plain.logits.size()); ++i)
            worst = std::max(worst, nmse(drafted.logits[i], plain.logits[i]));
        add(rows, "dspark", what + ": logits with drafts vs single steps (worst step)", worst, kVerifyMaxNmse);
        add(rows, "dspark", what + ": drafts kept and rejected",
            drafted.stats.accepted_tokens > 0 && drafted.stats.accepted_tokens < drafted.stats.drafted_tokens ? 0.0 : 1.0, 0.0);
        // The rings hold the trunk's confirmed positions only: a fresh CPU build over them.
        std::vector<std::int32_t> all = opt.prompt;
        all.insert(all.end(), drafted.tokens.begin(), drafted.tokens.end());
        const std::int64_t P = dspark.runner().position();
        if (P <= std::int64_t(opt.prompt.size()) || P >= std::int64_t(all.size())) {
            add(rows, "dspark", what + ": rings' position " + std::to_string(P) + " inside the generation", 1.0, 0.0);
            continue;
        }
        const aff::DsparkState fresh = aff::test::fresh_dspark_rings(cpu, all, P);
        double ring = 0;
        for (std::size_t s = 0; s < fresh.stages.size(); ++s)
            ring = std::max(ring, nmse(dspark.runner().ring(s), fresh.stages[s].ring));
        add(rows, "dspark", what + ": rings after the generation vs a fresh CPU build (worst stage)", ring, kStageMaxNmse);
    }
}

// A runner that forwards every call to `inner` but greedy: the drafter then runs the per-guess
// calls and picks each guess on the host (the path before the device chain), on the same stages.
class HostPicks final : public aff::test::ForwardingDsparkRunner {
public:
    using ForwardingDsparkRunner::ForwardingDsparkRunner;
};

constexpr double kConfidenceMaxDiff = 1e-5;  // the head's D + r products in another fp32 order, then a sigmoid

// The greedy chain on the device (DsparkRunner::greedy: GpuModel::dspark_greedy) against the
// per-guess calls with host picks on the same device stages:
//   - one block, three prompts, every count 1..γ: the ids equal the host chain's, the
//     confidences within kConfidenceMaxDiff of the host's (Model::dspark_confidence over the
//     block's y row);
//   - generation, k = 1..5, the default survival cut (0.25, so proposals are cut short): each
//     proposal's ids equal (a confidence product within 1e-5 of the threshold could cut one
//     differently: not met on these prompts, and the tokens could not differ anyway), the
//     tokens those without drafts, and the rings and their position after equal bit for bit.
void device_chain(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const int V = c.vocab_size, g = c.dspark.block_size;
    for (int p = 0; p < 3; ++p) {
        auto seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
        std::string why;
        std::unique_ptr<aff::DsparkRunner> runner = aff::make_gpu_dspark_runner(cpu, *seq, why);
        if (!runner) {
            rows.push_back({"dspark", "device chain: no GPU DSpark runner: " + why, INFINITY, 0.0, false});
            return;
        }
        const std::vector<std::int32_t> toks = random_tokens(9 + 7 * p, V);
        {
            aff::test::RingFeed feed(*runner, nullptr, nullptr);
            seq->forward(toks, false);
        }
        const std::int32_t anchor = toks.back();
        runner->block(anchor);
        // The host chain: the per-guess calls, picked with the drafters' rule.
        std::vector<std::int32_t> want;
        std::vector<float> want_c;
        std::optional<aff::Sampler> none;
        std::int32_t prev = anchor;
        for (int i = 0; i < g; ++i) {
            want_c.push_back(runner->confidence(std::size_t(i), prev));
            prev = aff::draft_pick(none, runner->guess_logits(std::size_t(i), prev), {});
            want.push_back(prev);
        }
        for (int count = 1; count <= g; ++count) {
            std::vector<std::int32_t> ids;
            std::vector<float> conf;
            const bool ran = runner->greedy(anchor, std::size_t(count), ids, conf);
            const std::string what = "device chain, prompt " + std::to_string(p) + ", " + std::to_string(count) + " guesses";
            long long differ = ran && ids.size() == std::size_t(count) && conf.size() == std::size_t(count) ? 0 : 1000;
            double worst = 0;
            for (std::size_t i = 0; i < std::min<std::size_t>(ids.size(), std::size_t(count)); ++i) {
                differ += ids[i] != want[i];
                worst = std::max(worst, std::fabs(double(conf[i]) - want_c[i]));
            }
            add(rows, "dspark", what + ": ids vs the host chain's, differing", double(differ), 0.0);
            add(rows, "dspark", what + ": confidences vs the host's (worst abs diff)", differ ? 1.0 : worst,
                kConfidenceMaxDiff);
        }
    }
    aff::GenerateOptions opt;
    opt.prompt = random_tokens(12, V);
    opt.max_new_tokens = 30;
    opt.sampling.temperature = 0;
    auto plain_seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
    const Outcome plain = generate_on(*plain_seq, opt, nullptr);
    for (std::size_t k : {1, 2, 3, 4, 5}) {
        auto dev_seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
        auto host_seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
        std::string why;
        auto dev_runner = aff::make_gpu_dspark_runner(cpu, *dev_seq, why);
        auto host_runner = aff::make_gpu_dspark_runner(cpu, *host_seq, why);
        if (!dev_runner || !host_runner) {
            rows.push_back({"dspark", "device chain: no GPU DSpark runner: " + why, INFINITY, 0.0, false});
            return;
        }
        aff::DsparkDrafter dev(std::move(dev_runner), k);
        aff::DsparkDrafter host(std::make_unique<HostPicks>(std::move(host_runner)), k);
        Recording dev_rec(dev), host_rec(host);
        const Outcome d = generate_on(*dev_seq, opt, &dev_rec);
        generate_on(*host_seq, opt, &host_rec);
        const std::string what = "device chain, k=" + std::to_string(k);
        long long ids = dev_rec.proposals.size() == host_rec.proposals.size() ? 0 : 1000;
        std::size_t guesses = 0;
        for (std::size_t i = 0; i < std::min(dev_rec.proposals.size(), host_rec.proposals.size()); ++i) {
            ids += dev_rec.proposals[i] != host_rec.proposals[i];
            guesses += dev_rec.proposals[i].size();
        }
        add(rows, "dspark", what + ": proposals vs the host picks' (" + std::to_string(dev_rec.proposals.size()) +
                                " proposals, " + std::to_string(guesses) + " guesses), differing",
            guesses > 0 ? double(ids) : 1.0, 0.0);
        long long diff = d.tokens.size() == plain.tokens.size() ? 0 : 1000;
        for (std::size_t i = 0; i < std::min(d.tokens.size(), plain.tokens.size()); ++i) diff += d.tokens[i] != plain.tokens[i];
        add(rows, "dspark", what + ": greedy tokens with device-chain drafts vs without, differing", double(diff), 0.0);
        long long ring = dev.runner().position() == host.runner().position() ? 0 : 1000000000;
        for (std::size_t s = 0; s < cpu.weights().dspark.stages.size(); ++s)
            ring += differing(dev.runner().ring(s), host.runner().ring(s));
        add(rows, "dspark", what + ": rings and position after, device chain vs host picks (floats differing)", double(ring),
            0.0);
    }
}

bool says(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The wide geometry (wide_container.hpp: D = I = 1024, moe_gemv's shapes) with DSpark stages,
// quantised as a main container and its draft container: codebook-stored experts, so the trunk
// can be tiered and the stages' experts placed. Greedy tokens with device-stage drafts (k = 3)
// on the resident trunk, and on a tiered one (two slab slots) with the stages' experts in RAM
// (auto) and in VRAM, against the resident trunk without drafts.
void codebook_stages(std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    TempDir tmp("dspark-wide");
    const std::string dir = tmp / "ck", main = tmp / "m.aff", draft = tmp / "m.dspark.aff";
    aff::test::write_random_dspark_checkpoint(dir, 11, {}, wide_geometry(), true);
    quantize_checkpoint_to(dir, main, aff::quant::Rotation::off, pool);
    aff::quant::QuantizeOptions q;
    q.src_dir = dir;
    q.out_path = draft;
    q.draft = true;
    q.codebook_path = main;
    q.tool = "aff_gpu_tests";
    q.created = "2026-01-01T00:00:00Z";
    aff::quant::quantize_checkpoint(q, pool, aff::null_progress());
    auto cpu = aff::load_model_with_draft(main, draft, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(main)));
    aff::GenerateOptions opt;
    opt.prompt = random_tokens(9, cpu->config().vocab_size);
    opt.max_new_tokens = 16;
    opt.sampling.temperature = 0;
    std::size_t slot = 0;
    Outcome plain;
    {
        auto seq = aff::make_gpu_sequence(*cpu, &reader, gemv_options());
        aff::gpu::GpuModel& g = dynamic_cast<aff::GpuTrunk&>(*seq).gpu_model();
        add(rows, "dspark", "wide TQ2875 + DSpark: the stages are on the GPU (" + g.dspark_why_not() + ")",
            g.has_dspark() ? 0.0 : 1.0, 0.0);
        slot = (g.expert_extent(0, 0).bytes + 255) / 256 * 256;
        plain = generate_on(*seq, opt, nullptr);
    }
    struct Case {
        const char* name;
        bool tiered;
        aff::gpu::DraftPlacement placement;
        const char* where;
    };
    for (const Case& k : {Case{"resident, auto", false, aff::gpu::DraftPlacement::automatic, "VRAM"},
                          Case{"tiered, auto", true, aff::gpu::DraftPlacement::automatic, "RAM"},
                          Case{"tiered, ram", true, aff::gpu::DraftPlacement::ram, "RAM"},
                          Case{"tiered, vram", true, aff::gpu::DraftPlacement::vram, "VRAM"}}) {
        const std::string what = std::string("wide TQ2875 + DSpark, ") + k.name;
        aff::gpu::GpuOptions o = gemv_options();
        if (k.tiered) o.tiers.slab_cap = 2 * slot;
        o.draft_placement = k.placement;
        try {
            auto seq = aff::make_gpu_sequence(*cpu, &reader, o);
            aff::gpu::GpuModel& g = dynamic_cast<aff::GpuTrunk&>(*seq).gpu_model();
            add(rows, "dspark", what + ": trunk tiered as asked", g.tiers().tiered == k.tiered ? 0.0 : 1.0, 0.0);
            add(rows, "dspark", what + ": the start-up line says the stages' experts are in " + k.where,
                says(g.describe(), std::string("DSpark stages on the GPU, their routed experts in ") + k.where) ? 0.0 : 1.0,
                0.0);
            std::string why;
            auto runner = aff::make_gpu_dspark_runner(*cpu, *seq, why);
            if (!runner) {
                rows.push_back({"dspark", what + ": no GPU DSpark runner: " + why, INFINITY, 0.0, false});
                continue;
            }
            add(rows, "dspark", what + ": the runner says " + runner->stages(),
                runner->stages() == std::string("stages on the GPU, their routed experts in ") + k.where ? 0.0 : 1.0, 0.0);
            aff::DsparkDrafter dspark(std::move(runner), 3, 0.0f);
            Prompted prompted(dspark, plain.tokens, opt.prompt.size());
            const Outcome drafted = generate_on(*seq, opt, &prompted);
            long long diff = drafted.tokens.size() == plain.tokens.size() ? 0 : 1000;
            for (std::size_t i = 0; i < std::min(drafted.tokens.size(), plain.tokens.size()); ++i)
                diff += drafted.tokens[i] != plain.tokens[i];
            add(rows, "dspark", what + ": greedy tokens with device-stage drafts (k=3) vs the resident trunk without (" +
                                    std::to_string(drafted.stats.accepted_tokens) + " of " +
                                    std::to_string(drafted.stats.drafted_tokens) + " accepted), differing",
                double(diff), 0.0);
        } catch (const std::exception& e) {
            rows.push_back({"dspark", what + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}

}  // namespace

AFF_DEVICE_TEST("dspark") {
    aff::ThreadPool pool(0);
    TempDir tmp("dspark");
    const std::string dir = tmp / "tiny-dspark";
    try {
        aff::test::write_random_dspark_checkpoint(dir, 3);
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        check_taps(*cpu, ck, rows);
        for (aff::DsparkStages where : {aff::DsparkStages::automatic, aff::DsparkStages::host})
            check_stages(*cpu, ck, rows, where);
        greedy_identity(*cpu, ck, rows, aff::DsparkStages::automatic, {1, 2, 3, 4, 5});
        greedy_identity(*cpu, ck, rows, aff::DsparkStages::host, {3});
        device_chain(*cpu, ck, rows);
        // --draft-placement: accepted with the stages on the device (dense experts: vram only,
        // ram is refused by the expert store), refused with host stages, with one reason.
        aff::gpu::GpuOptions vram;
        vram.draft_placement = aff::gpu::DraftPlacement::vram;
        auto placed = aff::make_gpu_sequence(*cpu, &ck, vram);
        std::string why;
        add(rows, "dspark", "--draft-placement vram with the stages on the device: a device runner",
            aff::make_gpu_dspark_runner(*cpu, *placed, why) ? 0.0 : 1.0, 0.0);
        const bool refused = !aff::make_gpu_dspark_runner(*cpu, *placed, why, aff::DsparkStages::host) &&
                             why.find("--draft-placement") == 0;
        add(rows, "dspark", "--draft-placement vram with host stages: refused (" + why + ")", refused ? 0.0 : 1.0, 0.0);
        // Attention on the CPU: the stages cannot come to the device; the host stages serve.
        aff::gpu::GpuOptions cpu_attention = gemv_options();
        cpu_attention.cpu_attention = true;
        auto host = aff::make_gpu_sequence(*cpu, &ck, cpu_attention);
        auto fallback = aff::make_gpu_dspark_runner(*cpu, *host, why);
        add(rows, "dspark", "attention on the CPU: the host stages, saying why (" +
                                (fallback ? fallback->stages() : "no runner: " + why) + ")",
            fallback && fallback->stages() == "stages on the CPU (attention runs on the CPU)" ? 0.0 : 1.0, 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"dspark", std::string("random DSpark checkpoint threw: ") + e.what(), INFINITY, 0.0, false});
    }
    try {
        codebook_stages(rows);
    } catch (const std::exception& e) {
        rows.push_back({"dspark", std::string("wide DSpark container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    try {  // tiny-a has no DSpark stages
        const std::string a = test_data() + "/models/tiny-a";
        auto cpu = aff::Model::load(a, pool);
        const aff::Checkpoint ck(a);
        auto seq = aff::make_gpu_sequence(*cpu, &ck, aff::gpu::GpuOptions{});
        std::string why;
        const bool none = !aff::make_gpu_dspark_runner(*cpu, *seq, why) && why == "the model has no DSpark stages";
        add(rows, "dspark", "tiny-a (no DSpark stages): no GPU runner (" + why + ")", none ? 0.0 : 1.0, 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"dspark", std::string("tiny-a threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
