// Device test of the MTP layer on the GPU (libaff/gpu/forward_mtp.cpp) and of drafting with it
// (libaff/runtime/gpu_mtp_runner.hpp under MtpDrafter), on the fixtures with an MTP layer
// (tiny-a-fp8: FP8 projections; tiny-trained: the trained checkpoint):
//   - GpuModel::mtp_forward against Model::mtp_forward: a prompt's trunk streams (GEMV path,
//     gemm_min_tokens 0, so both trunks are held to 1e-9) kept on the device, the MTP layer
//     over all its positions, then two chained steps on its own output streams: logits and
//     the MTP ring within kMtpMaxNmse (one more layer of fp32 sums in other orders on top of
//     the trunk's 1e-9);
//   - greedy generation with drafts (k = 1 and 3, three prompts, default options: verify calls
//     of up to 4 tokens take the GEMVs) gives the tokens of generation without, token for
//     token (0 differing), and the logits within kVerifyMaxNmse of the single steps';
//   - the greedy chain on the device (GpuModel::mtp_draft_greedy, kernels/argmax.hpp) against
//     the same runner with host picks: every proposal's ids equal (three prompts, k = 1..5
//     and 8 on tiny-trained, 1 and 4 on tiny-a-fp8), the tokens a generation's without drafts, the MTP position and ring after equal
//     bit for bit;
//   - after a generation with rejections (k = 4, greedy and sampled), the drafter's ring is a
//     fresh MTP run's over the same trunk positions, within kMtpMaxNmse (a ring row left by a
//     rejected chained guess would differ by O(1));
//   - tiered: on a container of V4-Flash's geometry with an MTP layer (one layer and the MTP
//     layer of 8 experts, make_geometry_container --mtp's writer), the trunk's experts tiered
//     (2 slab slots) and the MTP layer's resident: the MTP logits, chained ones included, are
//     the all-resident model's bit for bit (its experts read through the same table);
//   - --draft-placement (placed_mtp): the MTP layer's experts in pinned host memory, all
//     resident and tiered, give vram's MTP logits bit for bit and greedy drafts vram's tokens
//     and logits float for float; the start-up line names where they are; the memory plan
//     leaves them out; dense experts refuse ram;
//   - refusals: a model without MTP tensors has no MTP layer on the GPU and mtp_forward
//     throws unsupported; more tokens than the stored window is a usage error.
#include "device_test.hpp"
#include "mtp_run.hpp"
#include "tier_run.hpp"
#include "wide_container.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_sequence.hpp"
#include "libaff/runtime/mtp_drafter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr double kMtpMaxNmse = 1e-8;     // trunk (1e-9 bound) plus the MTP layer's own reordered sums
constexpr double kVerifyMaxNmse = 1e-9;  // a verify call's rows against single steps: fp32 orders only

std::vector<float> last_rows(const std::vector<float>& streams, std::size_t from, std::size_t row) {
    return std::vector<float>(streams.begin() + std::ptrdiff_t(from * row), streams.end());
}

void compare_mtp(const std::string& name, const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    aff::gpu::GpuOptions o;
    o.gemm_min_tokens = 0;
    aff::gpu::GpuModel g(cpu, &ck, o);
    if (!g.has_mtp()) {
        rows.push_back({"mtp", name + ": no MTP layer on the GPU (" + g.mtp_why_not() + ")", INFINITY, 0.0, false});
        return;
    }
    const aff::ModelConfig& c = cpu.config();
    const int V = c.vocab_size, W = c.sliding_window;
    const std::size_t row = std::size_t(c.hc_mult) * c.hidden_size;
    const int n = std::min(12, W);
    const std::vector<std::int32_t> toks = random_tokens(n + 3, V);
    const std::span<const std::int32_t> prompt(toks.data(), std::size_t(n));
    // The trunks.
    aff::DecodeState cs = cpu.new_state();
    std::vector<float> streams;
    cpu.forward(cs, prompt, true, &streams);
    aff::gpu::GpuDecodeState gs = g.new_state();
    g.forward(gs, prompt, true);
    aff::gpu::GpuDecodeState gm = g.new_mtp_state();
    g.keep_streams(gm, 0, 0, n);
    // The MTP layer over positions 0..n-1 (tokens 1..n), then two chained steps.
    const std::span<const std::int32_t> next(toks.data() + 1, std::size_t(n));
    std::vector<float> out;
    const std::vector<float> want = cpu.mtp_forward(cs, streams, next, true, &out);
    const std::vector<float> got = g.mtp_forward(gm, next, aff::gpu::MtpInput::trunk, true);
    add(rows, "mtp", name + ": mtp_forward logits [" + std::to_string(n) + ", " + std::to_string(V) + "] vs CPU",
        nmse(got, want), kMtpMaxNmse);
    double chained = 0;
    for (int j = 0; j < 2; ++j) {
        const std::int32_t t[1] = {toks[std::size_t(n + 1 + j)]};
        const std::vector<float> h = last_rows(out, out.size() / row - 1, row);
        const std::vector<float> w1 = cpu.mtp_forward(cs, h, t, false, &out);
        const std::vector<float> g1 = g.mtp_forward(gm, t, aff::gpu::MtpInput::own);
        chained = std::max(chained, nmse(g1, w1));
    }
    add(rows, "mtp", name + ": two chained steps on the layer's own streams: logits vs CPU", chained, kMtpMaxNmse);
    add(rows, "mtp", name + ": MTP ring after them vs CPU", nmse(g.mtp_ring(gm), cs.mtp[0].ring), kMtpMaxNmse);
    add(rows, "mtp", name + ": MTP position " + std::to_string(gm.mtp_position) + " (want " + std::to_string(n + 2) + ")",
        gm.mtp_position == n + 2 ? 0.0 : 1.0, 0.0);
    // Save, chain, restore: the ring and the position are back.
    const std::vector<float> before = g.mtp_ring(gm);
    g.mtp_save_ring(gm);
    const std::int32_t t[1] = {1};
    g.mtp_forward(gm, t, aff::gpu::MtpInput::own);
    const double changed = double(differing(g.mtp_ring(gm), before));
    g.mtp_restore_ring(gm, n + 2);
    add(rows, "mtp", name + ": a chained step changes the ring (" + std::to_string(long(changed)) +
                         " floats), restore_ring puts it back: floats differing",
        changed > 0 ? double(differing(g.mtp_ring(gm), before)) : 1.0, 0.0);
    std::vector<std::int32_t> too_many(std::size_t(W) + 1, 1);
    add(rows, "mtp", name + ": more tokens than the window: usage error",
        usage_error([&] { g.mtp_forward(gm, too_many, aff::gpu::MtpInput::trunk); }), 0.0);
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

void greedy_identity(const std::string& name, const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const int V = cpu.config().vocab_size;
    for (int p = 0; p < 3; ++p) {
        aff::GenerateOptions opt;
        opt.prompt = random_tokens(6 + 9 * p, V);
        opt.max_new_tokens = 40;
        opt.sampling.temperature = 0;
        auto plain_seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
        const Outcome plain = generate_on(*plain_seq, opt, nullptr);
        for (std::size_t k : {std::size_t(1), std::size_t(3)}) {
            auto seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
            auto drafter = gpu_drafter(*seq, k);
            const Outcome drafted = generate_on(*seq, opt, drafter.get());
            long long diff = drafted.tokens.size() == plain.tokens.size() ? 0 : 1000;
            for (std::size_t i = 0; i < std::min(drafted.tokens.size(), plain.tokens.size()); ++i)
                diff += drafted.tokens[i] != plain.tokens[i];
            const std::string what = name + " prompt " + std::to_string(p) + " k=" + std::to_string(k);
            char acc[96];
            std::snprintf(acc, sizeof acc, " (%zu verify calls, %zu of %zu drafts accepted)", drafted.stats.verify_calls,
                          drafted.stats.accepted_tokens, drafted.stats.drafted_tokens);
            add(rows, "mtp", what + ": greedy tokens with drafts vs without, differing" + acc, double(diff), 0.0);
            double worst = 0;
            for (std::size_t i = 0; i < std::min(drafted.logits.size(), plain.logits.size()); ++i)
                worst = std::max(worst, nmse(drafted.logits[i], plain.logits[i]));
            add(rows, "mtp", what + ": logits with drafts vs single steps (worst step)", worst, kVerifyMaxNmse);
            add(rows, "mtp", what + ": drafts were verified", drafted.stats.drafted_tokens > 0 ? 0.0 : 1.0, 0.0);
        }
    }
}

// The greedy chain on the device (MtpRunner::greedy_chain: GpuModel::mtp_draft_greedy) against
// the same GPU runner with the guesses picked on the host (HostPicks): two sequences generating
// the same greedy text, each proposal's ids equal one for one, the tokens equal to a generation
// without drafts, and after it the MTP position and ring the host chain's bit for bit (the same
// calls on the same inputs: only where the argmax runs differs).
void device_chain(const std::string& name, const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows,
                  std::initializer_list<std::size_t> ks) {
    const int V = cpu.config().vocab_size;
    for (int p = 0; p < 3; ++p) {
        aff::GenerateOptions opt;
        opt.prompt = random_tokens(5 + 11 * p, V);
        opt.max_new_tokens = 30;
        opt.sampling.temperature = 0;
        auto plain_seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
        const Outcome plain = generate_on(*plain_seq, opt, nullptr);
        for (std::size_t k : ks) {
            auto dev_seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
            auto host_seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
            auto dev = gpu_drafter(*dev_seq, k);
            auto host = host_pick_drafter(*host_seq, k);
            Recording dev_rec(*dev), host_rec(*host);
            const Outcome d = generate_on(*dev_seq, opt, &dev_rec);
            const Outcome h = generate_on(*host_seq, opt, &host_rec);
            const std::string what = name + " prompt " + std::to_string(p) + " k=" + std::to_string(k);
            long long ids = dev_rec.proposals.size() == host_rec.proposals.size() ? 0 : 1000;
            std::size_t guesses = 0;
            for (std::size_t i = 0; i < std::min(dev_rec.proposals.size(), host_rec.proposals.size()); ++i) {
                ids += dev_rec.proposals[i] != host_rec.proposals[i];
                guesses += dev_rec.proposals[i].size();
            }
            add(rows, "mtp", what + ": device chain's proposals vs the host picks' (" +
                                 std::to_string(dev_rec.proposals.size()) + " proposals, " + std::to_string(guesses) +
                                 " guesses), differing",
                guesses > 0 ? double(ids) : 1.0, 0.0);
            long long diff = d.tokens.size() == plain.tokens.size() ? 0 : 1000;
            for (std::size_t i = 0; i < std::min(d.tokens.size(), plain.tokens.size()); ++i) diff += d.tokens[i] != plain.tokens[i];
            add(rows, "mtp", what + ": greedy tokens with device-chain drafts vs without, differing", double(diff), 0.0);
            add(rows, "mtp", what + ": MTP position and ring after, device chain vs host picks (floats differing)",
                dev->position() == host->position() ? double(differing(dev->ring(), host->ring())) : 1e9, 0.0);
        }
    }
    // The entry's own bounds.
    aff::gpu::GpuModel g(cpu, &ck, aff::gpu::GpuOptions{});
    aff::gpu::GpuDecodeState m = g.new_mtp_state();
    const std::int32_t one[1] = {1};
    add(rows, "mtp", name + ": mtp_draft_greedy with k = 0 or k > the window: usage errors",
        usage_error([&] { g.mtp_draft_greedy(m, one, 0); }) +
            usage_error([&] { g.mtp_draft_greedy(m, one, std::size_t(cpu.config().sliding_window) + 1); }),
        0.0);
}

void ring_after_rejections(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const int V = c.vocab_size, W = c.sliding_window;
    aff::gpu::GpuOptions o;
    o.gemm_min_tokens = 0;  // GEMVs only, so the fresh prefill and the decode steps differ in fp32 order only
    for (float temperature : {0.0f, 0.9f}) {
        aff::GenerateOptions opt;
        opt.prompt = random_tokens(20, V);
        opt.max_new_tokens = 50;
        opt.sampling.temperature = temperature;
        opt.sampling.seed = 11;
        auto seq = aff::make_gpu_sequence(cpu, &ck, o);
        auto drafter = gpu_drafter(*seq, 4);
        const Outcome run = generate_on(*seq, opt, drafter.get());
        std::vector<std::int32_t> all = opt.prompt;
        all.insert(all.end(), run.tokens.begin(), run.tokens.end());
        const std::int64_t P = drafter->position();
        const std::string what = "tiny-trained T=" + std::to_string(temperature).substr(0, 3) + " (" +
                                 std::to_string(run.stats.accepted_tokens) + " of " +
                                 std::to_string(run.stats.drafted_tokens) + " drafts accepted, MTP at " +
                                 std::to_string(P) + ")";
        add(rows, "mtp", what + ": rejections happened",
            run.stats.accepted_tokens < run.stats.drafted_tokens && P > std::int64_t(opt.prompt.size()) &&
                    P < std::int64_t(all.size())
                ? 0.0
                : 1.0,
            0.0);
        // Fresh: the trunk over positions 0..P-1, the MTP layer over the last W of them.
        aff::gpu::GpuModel g(cpu, &ck, o);
        aff::gpu::GpuDecodeState st = g.new_state();
        g.forward(st, std::span(all).first(std::size_t(P)), false);
        const int keep = int(std::min<std::int64_t>(P, W));
        aff::gpu::GpuDecodeState m = g.new_mtp_state();
        g.keep_streams(m, P - keep, int(P - keep), keep);
        g.mtp_restart(m, P - keep);
        g.mtp_forward(m, std::span(all).subspan(std::size_t(P - keep + 1), std::size_t(keep)), aff::gpu::MtpInput::trunk);
        add(rows, "mtp", what + ": drafter's ring vs a fresh MTP run", nmse(drafter->ring(), g.mtp_ring(m)), kMtpMaxNmse);
    }
}

bool says(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }
void placed_mtp(const aff::Model& cpu, const aff::ContainerTensorReader& reader, const aff::gpu::GpuOptions& base,
                const std::vector<std::int32_t>& toks, const std::vector<float>& want, std::size_t slot,
                std::vector<Row>& rows);

void tiered_mtp(std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    TempDir tmp("mtp");
    const std::string path = write_v4_mtp(tmp, pool);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    const std::vector<std::int32_t> toks = random_tokens(12, cpu->config().vocab_size);
    aff::gpu::GpuOptions base;
    base.gemm_min_tokens = 0;
    std::vector<float> want;
    std::size_t slot = 0;
    {
        aff::gpu::GpuModel g(*cpu, &reader, base);
        add(rows, "mtp", "V4 geometry + MTP: the MTP layer is on the GPU (" + g.mtp_why_not() + ")", g.has_mtp() ? 0.0 : 1.0, 0.0);
        want = mtp_run(g, toks, 9);
        slot = tier_slot_bytes(g);
    }
    aff::gpu::GpuOptions tiered = base;
    tiered.tiers.slab_cap = 2 * slot;
    tiered.draft_placement = aff::gpu::DraftPlacement::vram;
    {
        aff::gpu::GpuModel g(*cpu, &reader, tiered);
        const std::vector<float> got = mtp_run(g, toks, 9);
        add(rows, "mtp", "V4 geometry + MTP, trunk's experts tiered (" + std::to_string(g.tiers().on_gpu) +
                             " in the slab), MTP's resident (vram): MTP logits vs all resident, floats differing",
            g.tiers().tiered ? double(differing(got, want)) : 1.0, 0.0);
        add(rows, "mtp", "tiered, --draft-placement vram: the start-up line says VRAM",
            says(g.describe(), "its routed experts in VRAM") ? 0.0 : 1.0, 0.0);
    }
    placed_mtp(*cpu, reader, base, toks, want, slot, rows);
}

// --draft-placement (GpuOptions::draft_placement) on the V4 geometry + MTP container: the MTP
// layer's experts in pinned host memory, all resident and tiered (automatic picks ram there),
// give the MTP logits of vram bit for bit (same kernels, same bytes, read over the bus); the
// memory plan no longer counts their bytes; greedy generation with drafts gives the tokens
// and the logits, float for float, of vram, and the tokens of generation without drafts.
void placed_mtp(const aff::Model& cpu, const aff::ContainerTensorReader& reader, const aff::gpu::GpuOptions& base,
                const std::vector<std::int32_t>& toks, const std::vector<float>& want, std::size_t slot,
                std::vector<Row>& rows) {
    const std::size_t E = std::size_t(cpu.config().n_routed_experts);
    std::size_t vram_expert_bytes = 0;
    {
        aff::gpu::GpuModel g(cpu, &reader, base);  // automatic, all resident: vram
        vram_expert_bytes = g.memory_plan().expert_bytes;
        add(rows, "mtp", "all resident, --draft-placement auto: the start-up line says VRAM",
            says(g.describe(), "its routed experts in VRAM") ? 0.0 : 1.0, 0.0);
    }
    aff::gpu::GpuOptions ram = base;
    ram.draft_placement = aff::gpu::DraftPlacement::ram;
    {
        aff::gpu::GpuModel g(cpu, &reader, ram);
        add(rows, "mtp", "all resident, --draft-placement ram: the start-up line says RAM (" + g.describe() + ")",
            says(g.describe(), "its routed experts in RAM") ? 0.0 : 1.0, 0.0);
        add(rows, "mtp", "--draft-placement ram: routed-expert bytes planned in VRAM less vram's, less the MTP layer's " +
                             std::to_string(E) + " extents",
            double(std::llabs((long long)(vram_expert_bytes - g.memory_plan().expert_bytes) - (long long)(E * slot))), 0.0);
        add(rows, "mtp", "all resident, MTP's experts in RAM: MTP logits vs vram, floats differing",
            double(differing(mtp_run(g, toks, 9), want)), 0.0);
    }
    aff::gpu::GpuOptions tiered = base;
    tiered.tiers.slab_cap = 2 * slot;  // automatic: ram, the trunk's experts being tiered
    {
        aff::gpu::GpuModel g(cpu, &reader, tiered);
        add(rows, "mtp", "tiered, --draft-placement auto: the start-up line says RAM",
            g.tiers().tiered && says(g.describe(), "its routed experts in RAM") ? 0.0 : 1.0, 0.0);
        add(rows, "mtp", "tiered, MTP's experts in RAM (auto): MTP logits vs all resident, floats differing",
            double(differing(mtp_run(g, toks, 9), want)), 0.0);
        add(rows, "mtp", "tiered, MTP's experts in RAM: the tiers count the trunk's experts only",
            double(std::llabs(g.tiers().on_gpu + g.tiers().in_pool - (long long)(cpu.config().num_layers * E))), 0.0);
    }
    // Greedy with drafts, vram against ram.
    aff::GenerateOptions opt;
    opt.prompt = toks;
    opt.max_new_tokens = 24;
    opt.sampling.temperature = 0;
    auto plain_seq = aff::make_gpu_sequence(cpu, &reader, base);
    const Outcome plain = generate_on(*plain_seq, opt, nullptr);
    Outcome drafted[2];
    const aff::gpu::GpuOptions placed[2] = {base, ram};
    for (int i = 0; i < 2; ++i) {
        auto seq = aff::make_gpu_sequence(cpu, &reader, placed[i]);
        auto drafter = gpu_drafter(*seq, 3);
        drafted[i] = generate_on(*seq, opt, drafter.get());
    }
    long long tokens_vs_plain = drafted[1].tokens == plain.tokens ? 0 : 1;
    long long logits_vs_vram = drafted[1].logits.size() == drafted[0].logits.size() ? 0 : 1000000;
    for (std::size_t i = 0; i < std::min(drafted[0].logits.size(), drafted[1].logits.size()); ++i)
        logits_vs_vram += differing(drafted[1].logits[i], drafted[0].logits[i]);
    char acc[96];
    std::snprintf(acc, sizeof acc, " (%zu verify calls, %zu of %zu drafts accepted)", drafted[1].stats.verify_calls,
                  drafted[1].stats.accepted_tokens, drafted[1].stats.drafted_tokens);
    add(rows, "mtp", std::string("V4 geometry, MTP's experts in RAM: greedy tokens with drafts vs without, sequences differing") + acc,
        double(tokens_vs_plain), 0.0);
    add(rows, "mtp", "V4 geometry, MTP's experts in RAM: greedy tokens with drafts vs vram's, sequences differing",
        drafted[1].tokens == drafted[0].tokens ? 0.0 : 1.0, 0.0);
    add(rows, "mtp", "V4 geometry, MTP's experts in RAM: logits with drafts vs vram's, floats differing", double(logits_vs_vram), 0.0);
    add(rows, "mtp", "V4 geometry, MTP's experts in RAM: drafts were verified", drafted[1].stats.drafted_tokens > 0 ? 0.0 : 1.0, 0.0);
}

}  // namespace

AFF_DEVICE_TEST("mtp") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a-fp8", "tiny-trained"}) {
        try {
            const std::string dir = test_data() + "/models/" + name;
            auto cpu = aff::Model::load(dir, pool);
            const aff::Checkpoint ck(dir);
            compare_mtp(name, *cpu, ck, rows);
            greedy_identity(name, *cpu, ck, rows);
            // Every k on the trained model (its drafts are accepted: long chains verified);
            // the random-weight fixture, FP8 projections, at two.
            if (std::string(name) == "tiny-trained")
                device_chain(name, *cpu, ck, rows, {1, 2, 3, 4, 5, 8});
            else
                device_chain(name, *cpu, ck, rows, {1, 4});
            if (std::string(name) == "tiny-trained") {
                ring_after_rejections(*cpu, ck, rows);
                // Dense expert stacks have no extents to keep in host memory: ram is refused.
                aff::gpu::GpuOptions ram;
                ram.draft_placement = aff::gpu::DraftPlacement::ram;
                double refused = 1.0;
                try {
                    aff::gpu::GpuModel g(*cpu, &ck, ram);
                } catch (const aff::Error& e) {
                    refused = e.kind() == aff::ErrorKind::unsupported ? 0.0 : 1.0;
                }
                add(rows, "mtp", "tiny-trained (dense experts): --draft-placement ram refused as unsupported", refused, 0.0);
            }
        } catch (const std::exception& e) {
            rows.push_back({"mtp", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    try {
        tiered_mtp(rows);
    } catch (const std::exception& e) {
        rows.push_back({"mtp", std::string("V4 geometry + MTP threw: ") + e.what(), INFINITY, 0.0, false});
    }
    try {  // tiny-a's checkpoint has no MTP tensors
        const std::string dir = test_data() + "/models/tiny-a";
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        aff::gpu::GpuModel g(*cpu, &ck, aff::gpu::GpuOptions{});
        double unsupported = 1.0;
        try {
            aff::gpu::GpuDecodeState m = g.new_mtp_state();
        } catch (const aff::Error& e) {
            unsupported = e.kind() == aff::ErrorKind::unsupported ? 0.0 : 1.0;
        }
        add(rows, "mtp", "tiny-a (no MTP tensors): has_mtp false, new_mtp_state unsupported",
            !g.has_mtp() ? unsupported : 1.0, 0.0);
    } catch (const std::exception& e) {
        rows.push_back({"mtp", std::string("tiny-a threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
