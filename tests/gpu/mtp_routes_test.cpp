// Device test of the MTP layer's routing on the GPU (GpuModel::mtp_forward with a route
// observer: forward_routes.cpp's report_mtp_routes), held to what the CPU reference's
// Model::mtp_forward reports for the same model and tokens (formats/route-trace.md §5.1: a
// draft step is one call of layer L, the MTP layer):
//   calls: on the fixtures with an MTP layer (tiny-a-fp8, tiny-trained), exact path (fp32
//     GEMVs everywhere), a 12-token prompt through the trunk, the MTP layer over its positions
//     and two chained steps. The GPU's observer sees the CPU's events in the CPU's order (the
//     trunk call's layers 0..L-1 and its end, then per MTP call one event of layer L and its
//     end) with the same layers, starts and tokens; the MTP layer's expert ids equal the CPU's
//     at every MTP position whose choices the CPU made by a relative margin of at least
//     kNearTie (SelectionMargins of the MTP calls; prompts drawn again up to kAttempts times, as
//     route_trace_test does) and its gate weights within kRouteWeightTolerance of the routed
//     scaling factor; recording leaves every MTP logit bit as it was and captures no graph.
//   drafts: greedy generation with MTP drafts (k = 3) on tiny-trained, on the GPU (exact path)
//     and on the CPU, each with an observer: the same tokens and draft statistics, k MTP calls
//     a verify call, the MTP calls' starts and tokens equal one for one, their ids differing
//     in at most 2 % of the selections (route_trace_device.sh's bound on the exact path; no
//     margins are at hand inside the loop).
//   tiers: on a container of V4-Flash's geometry with an MTP layer (one layer and the MTP
//     layer of 8 experts), the trunk's experts tiered (2 slab slots), the MTP layer's in VRAM
//     and in RAM: the MTP events are the all-resident model's bit for bit, and the expert tiers'
//     mover counted the trunk's tokens only (the MTP layer's routing is not the tier engine's).
#include "device_test.hpp"
#include "route_events.hpp"
#include "forward_compare.hpp"
#include "mtp_run.hpp"
#include "tier_run.hpp"
#include "wide_container.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/gpu_sequence.hpp"
#include "libaff/runtime/mtp_drafter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr int kAttempts = 4;  // prompts drawn for a near-tie-free MTP reference

// Events whose layer, start or tokens differ (a length difference counts as the longer length).
long long events_differing(const std::vector<Event>& a, const std::vector<Event>& b) {
    if (a.size() != b.size()) return static_cast<long long>(std::max(a.size(), b.size()));
    long long d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += a[i].layer != b[i].layer || a[i].start != b[i].start || a[i].tokens != b[i].tokens;
    return d;
}

// Floats or ids whose bits differ between two runs' events of one layer (bit-exactness).
long long routing_bits_differing(const std::vector<Event>& a, const std::vector<Event>& b) {
    if (a.size() != b.size()) return 1000000;
    long long d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].ids.size() != b[i].ids.size() || a[i].weights.size() != b[i].weights.size()) return 1000000;
        for (std::size_t j = 0; j < a[i].ids.size(); ++j) d += a[i].ids[j] != b[i].ids[j];
        d += differing(a[i].weights, b[i].weights);
    }
    return d;
}

// The CPU reference of one prompt: the trunk over n tokens, the MTP layer over its positions
// (tokens 1..n), two chained steps (tokens n+1, n+2); its events and the MTP calls' margins.
struct Reference {
    std::vector<std::int32_t> toks;
    EventLog log;
    aff::SelectionMargins margins;
    int clean = 0;  // MTP positions (of n + 2) decided by a margin of at least kNearTie
};

void run_reference(const aff::Model& cpu, int n, Reference& r) {
    const aff::ModelConfig& c = cpu.config();
    const std::size_t row = std::size_t(c.hc_mult) * c.hidden_size;
    r.toks = random_tokens(n + 3, c.vocab_size);
    aff::DecodeState cs = cpu.new_state();
    cs.routes = &r.log;
    std::vector<float> streams;
    cpu.forward(cs, std::span<const std::int32_t>(r.toks.data(), std::size_t(n)), true, &streams);
    cs.margins = &r.margins;  // the MTP calls' only
    std::vector<float> out;
    cpu.mtp_forward(cs, streams, std::span<const std::int32_t>(r.toks.data() + 1, std::size_t(n)), true, &out);
    for (int j = 0; j < 2; ++j) {
        const std::vector<float> h(out.end() - std::ptrdiff_t(row), out.end());
        const std::int32_t t[1] = {r.toks[std::size_t(n + 1 + j)]};
        cpu.mtp_forward(cs, h, t, false, &out);
    }
    r.clean = 0;
    for (int p = 0; p < n + 2; ++p)
        r.clean += std::size_t(p) >= r.margins.by_position.size() || r.margins.by_position[std::size_t(p)] >= kNearTie;
}

// The same calls on the GPU (mtp_run), observed by `log` when given; the MTP calls' logits, concatenated.
std::vector<float> run_gpu(aff::gpu::GpuModel& g, const std::vector<std::int32_t>& toks, int n, EventLog* log) {
    g.set_route_observer(log);
    std::vector<float> all = mtp_run(g, toks, n);
    g.set_route_observer(nullptr);
    return all;
}

void compare_calls(const std::string& name, const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const int L = c.num_layers, K = c.experts_per_token, n = std::min(12, c.sliding_window);
    Reference best;
    for (int a = 0; a < kAttempts; ++a) {
        Reference r;
        run_reference(cpu, n, r);
        if (a == 0 || r.clean > best.clean) best = std::move(r);
        if (best.clean == n + 2) break;
    }
    aff::gpu::GpuOptions o;
    o.exact = true;
    o.gemm_min_tokens = 0;
    aff::gpu::GpuModel g(cpu, &ck, o);
    if (!g.has_mtp()) {
        rows.push_back({"mtp_routes", name + ": no MTP layer on the GPU (" + g.mtp_why_not() + ")", INFINITY, 0.0, false});
        return;
    }
    const std::vector<float> plain = run_gpu(g, best.toks, n, nullptr);
    const std::size_t graphs = g.graphs_captured();
    EventLog log;
    const std::vector<float> observed = run_gpu(g, best.toks, n, &log);
    add(rows, "mtp_routes", name + ": events (layer, start, tokens) vs the CPU's, in order, differing (" +
                                std::to_string(best.log.events.size()) + " on the CPU)",
        double(events_differing(log.events, best.log.events)), 0.0);
    // The MTP calls, explicitly: one event of layer L and its end each, at 0, n and n + 1.
    const std::vector<Event> mtp = log.of_layer(L);
    bool shape = mtp.size() == 3 && log.events.size() >= 6;
    const std::int64_t starts[3] = {0, n, n + 1};
    for (std::size_t i = 0; shape && i < 3; ++i)
        shape = mtp[i].start == starts[i] && mtp[i].ids.size() == mtp[i].tokens.size() * std::size_t(K) &&
                mtp[i].tokens.size() == (i == 0 ? std::size_t(n) : 1);
    for (std::size_t i = 0; shape && i < 3; ++i) {  // the last six events: (L, end) three times
        const Event& e = log.events[log.events.size() - 6 + 2 * i];
        shape = e.layer == L && log.events[log.events.size() - 5 + 2 * i].layer == -1;
    }
    add(rows, "mtp_routes", name + ": 3 MTP calls reported as layer L then an end, at MTP positions 0, n, n+1",
        shape ? 0.0 : 1.0, 0.0);
    // Ids and weights against the CPU's, at the clean MTP positions.
    const std::vector<Event> want = best.log.of_layer(L);
    const double scale = c.routed_scaling_factor;
    long long mismatches = 0, compared = 0;
    double weight_diff = 0;
    for (std::size_t i = 0; i < std::min(mtp.size(), want.size()); ++i) {
        if (mtp[i].ids.size() != want[i].ids.size() || mtp[i].weights.size() != want[i].weights.size()) {
            ++mismatches;
            continue;
        }
        for (std::size_t t = 0; t < mtp[i].tokens.size(); ++t) {
            const std::size_t p = std::size_t(mtp[i].start) + t;
            if (p < best.margins.by_position.size() && best.margins.by_position[p] < kNearTie) continue;
            for (int j = 0; j < K; ++j) {
                const std::size_t at = t * std::size_t(K) + std::size_t(j);
                ++compared;
                mismatches += mtp[i].ids[at] != want[i].ids[at];
                weight_diff = std::max(weight_diff, std::fabs(double(mtp[i].weights[at]) - want[i].weights[at]) / scale);
            }
        }
    }
    std::printf("mtp_routes: %s: %lld MTP ids compared, %d of %d MTP positions clean\n", name.c_str(), compared, best.clean,
                n + 2);
    add(rows, "mtp_routes", name + ": MTP layer's ids differing from the CPU's (clean positions)", double(mismatches), 0.0);
    add(rows, "mtp_routes", name + ": MTP layer's weights, max |diff| / scale", compared > 0 ? weight_diff : INFINITY,
        kRouteWeightTolerance);
    add(rows, "mtp_routes", name + ": clean MTP positions under half", 2 * best.clean >= n + 2 ? 0.0 : 1.0, 0.0);
    add(rows, "mtp_routes", name + ": MTP logits with the observer vs without, floats differing",
        double(differing(observed, plain)), 0.0);
    add(rows, "mtp_routes", name + ": graphs captured by the observed MTP calls", double(g.graphs_captured() - graphs), 0.0);
}

struct Drafted {
    std::vector<std::int32_t> tokens;
    aff::GenerateStats stats;
    EventLog log;
};

void generate_drafted(aff::Sequence& seq, aff::Drafter& drafter, const std::vector<std::int32_t>& prompt, Drafted& out) {
    aff::GenerateOptions opt;
    opt.prompt = prompt;
    opt.max_new_tokens = 40;
    opt.sampling.temperature = 0;
    aff::GenerateHooks h;
    h.on_step = [&](const aff::GenerationStep& s) {
        out.tokens.push_back(s.token);
        return true;
    };
    h.drafter = &drafter;
    seq.set_route_observer(&out.log);
    out.stats = aff::generate(seq, opt, h);
    seq.set_route_observer(nullptr);
}

void compare_drafts(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    constexpr std::size_t k = 3;
    const int L = cpu.config().num_layers, K = cpu.config().experts_per_token;
    const std::vector<std::int32_t> prompt = {0, 1006, 1005, 1007, 1005, 1009, 1006, 1011, 1005, 1013, 1007};
    Drafted on_cpu, on_gpu;
    {
        aff::CpuSequence seq(cpu);
        aff::MtpDrafter drafter(cpu, seq, k);
        generate_drafted(seq, drafter, prompt, on_cpu);
    }
    {
        aff::gpu::GpuOptions o;
        o.exact = true;  // GEMVs and fp32 scores: the trunk and MTP logits within rounding of the CPU's
        auto seq = aff::make_gpu_sequence(cpu, &ck, o);
        auto drafter = gpu_drafter(*seq, k);
        generate_drafted(*seq, *drafter, prompt, on_gpu);
    }
    const aff::GenerateStats &a = on_gpu.stats, &b = on_cpu.stats;
    char what[160];
    std::snprintf(what, sizeof what, "tiny-trained k=3: GPU drafted as the CPU (%zu/%zu verify calls, %zu/%zu accepted)",
                  a.verify_calls, b.verify_calls, a.accepted_tokens, b.accepted_tokens);
    const bool alike = on_gpu.tokens == on_cpu.tokens && a.verify_calls == b.verify_calls &&
                       a.accepted_tokens == b.accepted_tokens && a.drafted_tokens == b.drafted_tokens && a.verify_calls > 0;
    add(rows, "mtp_routes", what, alike ? 0.0 : 1.0, 0.0);
    const std::vector<Event> g = on_gpu.log.of_layer(L), c = on_cpu.log.of_layer(L);
    add(rows, "mtp_routes", "tiny-trained k=3: GPU MTP calls reported (" + std::to_string(g.size()) + ") vs k x verify calls",
        double(std::llabs((long long)g.size() - (long long)(k * a.verify_calls))), 0.0);
    if (!alike) return;  // the calls below are the same calls only when both drafted alike
    add(rows, "mtp_routes", "tiny-trained k=3: GPU MTP calls' starts and tokens vs the CPU's, differing",
        double(events_differing(g, c)), 0.0);
    long long selections = 0, differ = 0;
    for (std::size_t i = 0; i < std::min(g.size(), c.size()); ++i)
        for (std::size_t t = 0; t * K < std::min(g[i].ids.size(), c[i].ids.size()); ++t) {
            ++selections;
            differ += !std::equal(g[i].ids.begin() + std::ptrdiff_t(t * K), g[i].ids.begin() + std::ptrdiff_t((t + 1) * K),
                                  c[i].ids.begin() + std::ptrdiff_t(t * K));
        }
    add(rows, "mtp_routes", "tiny-trained k=3: MTP selections differing from the CPU's (fraction of " +
                                std::to_string(selections) + ")",
        selections > 0 ? double(differ) / double(selections) : INFINITY, 0.02);
}

void tiered_calls(std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    TempDir tmp("mtp_routes");
    const std::string path = write_v4_mtp(tmp, pool);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    const int n = 9, L = cpu->config().num_layers;
    const std::vector<std::int32_t> toks = random_tokens(n + 3, cpu->config().vocab_size);
    aff::gpu::GpuOptions base;
    base.gemm_min_tokens = 0;
    std::vector<Event> want;
    std::size_t slot = 0;
    {
        aff::gpu::GpuModel g(*cpu, &reader, base);
        EventLog log;
        run_gpu(g, toks, n, &log);
        want = log.of_layer(L);
        slot = tier_slot_bytes(g);
    }
    add(rows, "mtp_routes", "V4 geometry + MTP, all resident: 3 MTP calls reported", want.size() == 3 ? 0.0 : 1.0, 0.0);
    for (const aff::gpu::DraftPlacement placed : {aff::gpu::DraftPlacement::vram, aff::gpu::DraftPlacement::ram}) {
        aff::gpu::GpuOptions tiered = base;
        tiered.tiers.slab_cap = 2 * slot;
        tiered.draft_placement = placed;
        aff::gpu::GpuModel g(*cpu, &reader, tiered);
        EventLog log;
        run_gpu(g, toks, n, &log);
        const std::string where = placed == aff::gpu::DraftPlacement::vram ? "VRAM" : "RAM";
        add(rows, "mtp_routes", "V4 geometry + MTP, trunk tiered, MTP's experts in " + where +
                                    ": MTP routing vs all resident, ids and floats differing",
            g.tiers().tiered ? double(routing_bits_differing(log.of_layer(L), want)) : 1.0, 0.0);
        add(rows, "mtp_routes", "trunk tiered, MTP's experts in " + where + ": the mover counted " +
                                    std::to_string(g.tiers().tokens) + " tokens (the trunk's " + std::to_string(n) + " only)",
            double(std::llabs((long long)g.tiers().tokens - n)), 0.0);
    }
}

}  // namespace

AFF_DEVICE_TEST("mtp_routes") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a-fp8", "tiny-trained"}) {
        try {
            const std::string dir = test_data() + "/models/" + name;
            auto cpu = aff::Model::load(dir, pool);
            const aff::Checkpoint ck(dir);
            compare_calls(name, *cpu, ck, rows);
            if (std::string(name) == "tiny-trained") compare_drafts(*cpu, ck, rows);
        } catch (const std::exception& e) {
            rows.push_back({"mtp_routes", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    try {
        tiered_calls(rows);
    } catch (const std::exception& e) {
        rows.push_back({"mtp_routes", std::string("V4 geometry + MTP threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
