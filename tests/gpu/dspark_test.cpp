// Device test of DSpark drafts on a GPU trunk (libaff/gpu/forward_taps.cpp: the trunk's tap
// features; libaff/runtime/gpu_dspark_runner.hpp under DsparkDrafter: the stages on the CPU
// reference fed by those taps), on the random checkpoint with DSpark stages that the CPU
// tests use (tests/common/random_dspark_checkpoint.hpp: 6 layers, taps after the last three,
// 3 stages, γ 5), written here:
//   - taps: GpuModel::last_taps after a prompt (GEMV path: gemm_min_tokens 0), a 3-token call
//     and two single steps (decode-sized calls: the tap layer's last expand is pending there)
//     against the CPU forward's DecodeState::taps, within kTapMaxNmse (the trunk's 1e-9);
//   - the trunk's logits with taps on are those with taps off, floats differing: 0 (the same
//     calls on two states of one model, taps switched on between them);
//   - rings and block: a GPU runner fed every call's taps against the CPU stages fed the CPU
//     trunk's: each stage's ring, then the block's Markov-corrected logits of all γ guesses and
//     their confidences, within kStageMaxNmse (the stages' own sums on top of the taps');
//   - greedy generation with GPU DSpark drafts (every call on the GEMVs; k = 1..5, every guess verified: min_survival 0;
//     the drafter's guesses, and the known continuation for some of them so that prefixes of
//     every length are kept) gives the tokens of generation without, token for token, and the
//     logits within kVerifyMaxNmse of the single steps'; after it, the drafter's rings are a
//     fresh CPU build's over the trunk's positions within kStageMaxNmse;
//   - refusals: a model without DSpark stages gets no GPU runner (why_not says so), and a
//     --draft-placement other than auto is refused with one reason.
#include "device_test.hpp"
#include "wide_container.hpp"

#include "../common/random_dspark_checkpoint.hpp"
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr double kTapMaxNmse = 1e-9;     // the trunk's streams, GEMV path: fp32 orders only
constexpr double kStageMaxNmse = 1e-8;   // plus the stages' own fp32 sums over those taps
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
}

// Feeds every trunk call's taps straight into the runner's rings (no drafts: nothing to reject).
class Feed final : public aff::TapListener {
public:
    explicit Feed(aff::DsparkRunner& r) : r_(r) { r_.listen(this); }
    ~Feed() override { r_.listen(nullptr); }
    void on_taps(std::int64_t start, std::size_t, std::span<const float> taps) override {
        if (start != r_.position()) r_.restart(start);
        r_.extend(taps);
    }

private:
    aff::DsparkRunner& r_;
};

void check_stages(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const int V = c.vocab_size, g = c.dspark.block_size;
    auto seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
    std::string why;
    std::unique_ptr<aff::DsparkRunner> runner = aff::make_gpu_dspark_runner(cpu, *seq, why);
    if (!runner) {
        rows.push_back({"dspark", "no GPU DSpark runner: " + why, INFINITY, 0.0, false});
        return;
    }
    const std::vector<std::int32_t> toks = random_tokens(22, V);
    aff::DecodeState cs = cpu.new_state();
    aff::DsparkState want = cpu.new_dspark_state();
    {
        Feed feed(*runner);
        for (auto call : {std::span(toks).first(20), std::span(toks).subspan(20, 1), std::span(toks).subspan(21, 1)}) {
            seq->forward(call, false);
            cpu.dspark_extend(want, cpu_taps(cpu, cs, call));
        }
    }
    for (std::size_t s = 0; s < want.stages.size(); ++s)
        add(rows, "dspark", "stage " + std::to_string(s) + " ring after 22 positions vs the CPU's",
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
        add(rows, "dspark", "block guess " + std::to_string(i) + ": Markov-corrected logits vs the CPU's",
            nmse(runner->guess_logits(std::size_t(i), prev), row), kStageMaxNmse);
        add(rows, "dspark", "block guess " + std::to_string(i) + ": confidence vs the CPU's (abs diff)",
            std::fabs(double(cg) - cw), 1e-5);
        prev = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    }
}

struct Outcome {
    std::vector<std::int32_t> tokens;
    std::vector<std::vector<float>> logits;
    aff::GenerateStats stats;
};

Outcome generate_on(aff::Sequence& seq, const aff::GenerateOptions& opt, aff::Drafter* drafter) {
    Outcome out;
    aff::GenerateHooks h;
    h.on_step = [&](const aff::GenerationStep& s) {
        out.tokens.push_back(s.token);
        return true;
    };
    h.on_logits = [&](std::int64_t, std::int32_t, std::span<const float> l) { out.logits.emplace_back(l.begin(), l.end()); };
    h.drafter = drafter;
    out.stats = aff::generate(seq, opt, h);
    return out;
}

// The inner DSpark drafter's proposals (so its rings live through the generation), the first
// few guesses replaced by the known greedy continuation (a random model's own guesses are
// almost never kept): verify calls keep prefixes of every length.
class Prompted final : public aff::Drafter {
public:
    Prompted(aff::DsparkDrafter& inner, std::vector<std::int32_t> truth, std::size_t prompt)
        : inner_(inner), truth_(std::move(truth)), prompt_(prompt) {}
    std::size_t max_tokens() const override { return inner_.max_tokens(); }
    std::vector<std::int32_t> propose(std::span<const std::int32_t> context) override {
        std::vector<std::int32_t> g = inner_.propose(context);
        const std::size_t at = context.size() - prompt_;
        for (std::size_t i = 0; i < g.size() && i < (calls_ % 4) && at + i < truth_.size(); ++i) g[i] = truth_[at + i];
        ++calls_;
        return g;
    }
    void start(const aff::SamplerParams& s) override { inner_.start(s); }
    void verified(std::size_t p, std::size_t a) override { inner_.verified(p, a); }

private:
    aff::DsparkDrafter& inner_;
    std::vector<std::int32_t> truth_;
    std::size_t prompt_;
    std::size_t calls_ = 0;
};

void greedy_identity(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const int V = cpu.config().vocab_size;
    aff::GenerateOptions opt;
    opt.prompt = random_tokens(14, V);
    opt.max_new_tokens = 30;
    opt.sampling.temperature = 0;
    auto plain_seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
    const Outcome plain = generate_on(*plain_seq, opt, nullptr);
    for (std::size_t k = 1; k <= 5; ++k) {
        auto seq = aff::make_gpu_sequence(cpu, &ck, gemv_options());
        std::string why;
        auto runner = aff::make_gpu_dspark_runner(cpu, *seq, why);
        if (!runner) {
            rows.push_back({"dspark", "no GPU DSpark runner: " + why, INFINITY, 0.0, false});
            return;
        }
        aff::DsparkDrafter dspark(std::move(runner), k, 0.0f);
        Prompted prompted(dspark, plain.tokens, opt.prompt.size());
        const Outcome drafted = generate_on(*seq, opt, &prompted);
        long long diff = drafted.tokens.size() == plain.tokens.size() ? 0 : 1000;
        for (std::size_t i = 0; i < std::min(drafted.tokens.size(), plain.tokens.size()); ++i)
            diff += drafted.tokens[i] != plain.tokens[i];
        const std::string what = "k=" + std::to_string(k);
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
        aff::DecodeState cs = cpu.new_state();
        aff::DsparkState fresh = cpu.new_dspark_state();
        cpu.dspark_extend(fresh, cpu_taps(cpu, cs, std::span<const std::int32_t>(all).first(std::size_t(P))));
        double ring = 0;
        for (std::size_t s = 0; s < fresh.stages.size(); ++s)
            ring = std::max(ring, nmse(dspark.runner().ring(s), fresh.stages[s].ring));
        add(rows, "dspark", what + ": rings after the generation vs a fresh CPU build (worst stage)", ring, kStageMaxNmse);
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
        check_stages(*cpu, ck, rows);
        greedy_identity(*cpu, ck, rows);
        // --draft-placement other than auto: refused with its reason.
        aff::gpu::GpuOptions ram;
        ram.draft_placement = aff::gpu::DraftPlacement::vram;
        auto placed = aff::make_gpu_sequence(*cpu, &ck, ram);
        std::string why;
        const bool refused = !aff::make_gpu_dspark_runner(*cpu, *placed, why) && why.find("--draft-placement") == 0;
        add(rows, "dspark", "--draft-placement vram with DSpark on a GPU trunk: refused (" + why + ")", refused ? 0.0 : 1.0, 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"dspark", std::string("random DSpark checkpoint threw: ") + e.what(), INFINITY, 0.0, false});
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
