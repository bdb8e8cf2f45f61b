// Device test of the expert tiers (GpuTierOptions, libaff/gpu/expert_tiers.hpp): codebook-
// stored experts split between a GPU slab and a pinned host pool that the kernels read over
// the bus, with the mover between calls, must give the all-resident model's logits bit for bit.
// On the wide random container as TQ2875 (moe_gemm prefill, moe_gemv decode) and TQ2875R, and
// on a 2-layer, 16-expert container of V4-Flash's real geometry (make_geometry_container's
// library call): a reference sequence on the default model (every expert in the arena: a
// 37-token prompt, greedy decode steps, a 6-token chunk, more steps), then the same calls on
// tiered models, slab capped (GpuTierOptions::slab_cap, --gpu-expert-mib) at every expert, half
// of them, one slot and none, with the mover static, demand (admits every miss) and heat. Rows:
//   - every logit equals the reference's bit for bit (floats differing, 0);
//   - the tier counts are plan_tiers's on the inputs the model reports (its own plan equals
//     plan_tiers(inputs)), the slab holds the capped number of slots and the pool the rest,
//     nothing on the SSD; the table's addresses, counted by where they point, agree (after the
//     run too: every promotion demotes one);
//   - the engine's hits add up: GPU hits + pool hits = expert reads, no SSD reads; with every
//     expert in the slab no pool hit, with none no GPU hit;
//   - static moves nothing; demand on a slab smaller than the model moves (> 0), and the
//     decode graphs are not recaptured by the moves;
//   - the mover's copy stream: the calls that waited for copies are exactly those after a pass
//     that queued some; stalls are never negative nor more than the waits; with copies a call
//     waited for, the copy stream was busy (> 0 s); demand on one slot moves after every call (a move every step,
//     its copies landing before the next call reads), logits still bit-identical;
//   - a card smaller than the model and no tier flag (--gpu-mib as the card, the headroom
//     derived): tiered because it does not fit, the derived headroom, the slab holding what is
//     left (a third of the experts), the pool the rest, logits bit-identical;
//   - refusals: belady (needs the future) and an unknown strategy are usage errors; move_expert on a
//     tiered model is a usage error.
// Prefill staging (staging_on): a 512-token chunk with the bus-read experts staged into HBM
// before the GEMMs, forced on, forced off and automatic, against the all-resident model, bit for
// bit (the rows are listed there).
// The decode prefetch (GpuTierOptions::prefetch_experts, on by default at 1: every tiered case
// above runs it) copies predicted pooled experts into HBM during attention: with it off, at 1,
// 2 and 3 (and 3 with the copy on a full grid rather than the throttled default, 2 with the
// bulk copy of kernels/expert_stage.hpp and with the threads'), the logits stay bit-identical; its counters agree with the script (rows in tiers_on).
// On the tiny fixtures (dense experts: moe_gemv does not take their widths) a slab cap leaves
// them untiered, same logits. Prints ms per decode step for each configuration.
#include "device_test.hpp"
#include "tier_run.hpp"
#include "wide_container.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/placement/tier_plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr int kPrompt = 37, kChunk = 6, kStepsBefore = 8, kStepsAfter = 3;

struct Script {
    std::vector<std::int32_t> prompt, chunk, steps;  // steps filled by the reference run
};

struct Run : TierRun {
    std::size_t recaptures = 0;       // decode graphs captured after the first step
    int calls = 0, calls_moving = 0;  // calls made; calls after which the mover queued copies
    bool last_moved = false;          // the last call's pass queued copies (no call waited for them yet)
};

Run run(aff::gpu::GpuModel& g, Script& sc, bool reference) {
    Run r;
    aff::gpu::GpuDecodeState st = g.new_state();
    std::uint64_t moves = 0;
    auto count = [&] {  // after each call: did its pass move anything
        const std::uint64_t now = g.tiers().moves;
        ++r.calls;
        r.last_moved = now > moves;
        r.calls_moving += r.last_moved ? 1 : 0;
        moves = now;
    };
    r.logits.push_back(g.forward(st, sc.prompt, false));
    count();
    std::size_t captured_after_first = 0;
    auto step = [&](int i) {
        tier_step(g, st, sc.steps, i, reference, r);
        if (i == 0) captured_after_first = g.graphs_captured();
        count();
    };
    for (int s = 0; s < kStepsBefore; ++s) step(s);
    r.logits.push_back(g.forward(st, sc.chunk, true));
    count();
    for (int s = kStepsBefore; s < kStepsBefore + kStepsAfter; ++s) step(s);
    r.recaptures = g.graphs_captured() - captured_after_first;
    return r;
}

bool same_plan(const aff::placement::TierPlan& a, const aff::placement::TierPlan& b) {
    return a.gpu_slots == b.gpu_slots && a.host_slots == b.host_slots && a.ssd_experts == b.ssd_experts &&
           a.gpu_budget == b.gpu_budget && a.headroom == b.headroom && a.slab_bytes == b.slab_bytes &&
           a.pool_bytes == b.pool_bytes;
}

struct Config {
    const char* name;
    std::int64_t slots;  // slab slots; -1: every expert
    const char* strategy;
    bool every_call = false;  // the mover must move after every call (demand on one slot: each dispatch misses)
    int prefetch = 1;         // GpuTierOptions::prefetch_experts (the default)
    int copy_blocks = aff::gpu::GpuTierOptions{}.prefetch_copy_blocks;  // its copy's blocks (0: a full grid)
    bool copy_bulk = aff::gpu::GpuTierOptions{}.prefetch_copy_bulk;      // its copy by the bulk-copy unit
};

void tiers_on(const std::string& label, const std::string& path, const std::vector<Config>& configs, std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    Script sc;
    Run want;
    std::size_t slot_bytes = 0;
    std::int64_t experts = 0;
    {
        aff::gpu::GpuModel g(*cpu, &reader, {});
        const aff::ModelConfig& c = g.config();
        experts = std::int64_t(c.num_layers) * c.n_routed_experts;
        sc.prompt = random_tokens(kPrompt, c.vocab_size);
        sc.chunk = random_tokens(kChunk, c.vocab_size);
        want = run(g, sc, true);
        add(rows, "tiers", label + ": the default model is not tiered (fits)", g.tiers().tiered ? 1.0 : 0.0, 0.0);
        slot_bytes = tier_slot_bytes(g);
        std::printf("tiers: %s: all resident (arena) %.3f ms a decode step\n", label.c_str(), want.step_ms());
    }
    std::uint64_t resident = 0;  // what stays on the GPU when tiered (the first configuration's report)
    for (const Config& cf : configs) {
        const std::int64_t slots = cf.slots < 0 ? experts : cf.slots;
        const std::string what = label + ", " + cf.name + " (" + std::to_string(slots) + " of " + std::to_string(experts) +
                                 " in the slab, " + cf.strategy + ")";
        try {
            aff::gpu::GpuOptions o;
            o.tiers.slab_cap = std::size_t(slots) * slot_bytes;
            o.tiers.strategy = cf.strategy;
            o.tiers.heat = eager_heat();  // the heat cases' moves (device_test.hpp says why)
            o.tiers.prefetch_experts = cf.prefetch;
            o.tiers.prefetch_copy_blocks = cf.copy_blocks;
            o.tiers.prefetch_copy_bulk = cf.copy_bulk;
            aff::gpu::GpuModel g(*cpu, &reader, o);
            const aff::gpu::GpuTierReport before = g.tiers();
            const Run got = run(g, sc, false);
            const aff::gpu::GpuTierReport r = g.tiers();
            add(rows, "tiers", what + ": floats differing", double(differ(got, want)), 0.0);
            add(rows, "tiers", what + ": tiered", r.tiered ? 0.0 : 1.0, 0.0);
            add(rows, "tiers", what + ": plan is plan_tiers(inputs)", same_plan(r.plan, aff::placement::plan_tiers(r.inputs)) ? 0.0 : 1.0, 0.0);
            add(rows, "tiers", what + ": |slab slots - cap|", double(std::llabs(r.plan.gpu_slots - slots)), 0.0);
            add(rows, "tiers", what + ": |pool slots - the rest|", double(std::llabs(r.plan.host_slots - (experts - slots))), 0.0);
            add(rows, "tiers", what + ": experts on the SSD", double(r.plan.ssd_experts), 0.0);
            add(rows, "tiers", what + ": |table in slab - slab slots| at load + after",
                double(std::llabs(before.on_gpu - slots) + std::llabs(r.on_gpu - slots)), 0.0);
            add(rows, "tiers", what + ": |table in pool - pool slots| at load + after",
                double(std::llabs(before.in_pool - (experts - slots)) + std::llabs(r.in_pool - (experts - slots))), 0.0);
            const aff::placement::Counters& k = r.counters;
            add(rows, "tiers", what + ": |GPU hits + pool hits - reads| + SSD reads",
                double(std::llabs(std::int64_t(k.gpu_hits + k.host_hits) - std::int64_t(k.accesses)) + k.ssd_reads), 0.0);
            add(rows, "tiers", what + ": the mover saw expert reads (0 = none)", k.accesses > 0 ? 0.0 : 1.0, 0.0);
            if (slots == experts) add(rows, "tiers", what + ": pool hits with every expert in the slab", double(k.host_hits), 0.0);
            if (slots == 0) add(rows, "tiers", what + ": GPU hits with no slab", double(k.gpu_hits), 0.0);
            if (std::string(cf.strategy) == "static") add(rows, "tiers", what + ": moves", double(r.moves), 0.0);
            if (std::string(cf.strategy) == "demand" && slots > 0 && slots < experts)
                add(rows, "tiers", what + ": demand moved nothing (1 = none)", r.moves > 0 ? 0.0 : 1.0, 0.0);
            add(rows, "tiers", what + ": decode graphs captured after the first step", double(got.recaptures), 0.0);
            // The decode prefetch (forward_prefetch.cpp) runs in the decode steps only (the prompt
            // and the chunk are longer than kDecodeTokens), at most `prefetch` experts a layer, only
            // where the pool holds some. With no slab every predicted expert is pooled: exactly
            // min(prefetch, k) a layer a step. Hash layers' predictions are their routing, so on a
            // model of hash layers only (the geometry container's 2 layers) every prefetched expert
            // is routed to.
            {
                const aff::ModelConfig& c = g.config();
                const std::uint64_t most = std::uint64_t(got.steps) * c.num_layers * std::uint64_t(std::max(0, cf.prefetch));
                if (cf.prefetch == 0 || slots == experts) {
                    add(rows, "tiers", what + ": experts prefetched with the prefetch off or no pool", double(r.prefetched_experts), 0.0);
                } else if (slots == 0) {
                    const std::uint64_t exact =
                        std::uint64_t(got.steps) * c.num_layers * std::uint64_t(std::min(cf.prefetch, c.experts_per_token));
                    add(rows, "tiers", what + ": |prefetched - steps x layers x min(prefetch, k)|",
                        double(std::llabs(std::int64_t(r.prefetched_experts) - std::int64_t(exact))), 0.0);
                } else {
                    add(rows, "tiers", what + ": prefetched nothing (1 = none)", r.prefetched_experts > 0 ? 0.0 : 1.0, 0.0);
                }
                add(rows, "tiers", what + ": prefetched over steps x layers x prefetch",
                    r.prefetched_experts > most ? double(r.prefetched_experts - most) : 0.0, 0.0);
                add(rows, "tiers", what + ": prefetch hits over prefetched",
                    r.prefetch_hits > r.prefetched_experts ? double(r.prefetch_hits - r.prefetched_experts) : 0.0, 0.0);
                if (std::all_of(c.hash_routed.begin(), c.hash_routed.begin() + c.num_layers, [](bool h) { return h; }))
                    add(rows, "tiers", what + ": hash layers only: |prefetch hits - prefetched|",
                        double(std::llabs(std::int64_t(r.prefetch_hits) - std::int64_t(r.prefetched_experts))), 0.0);
            }
            // The copy stream: every call after a pass that queued copies waited for them
            // (ExpertTiers::wait_for_moves), and no other call did.
            add(rows, "tiers", what + ": |calls that waited on copies - passes that queued them before a call|",
                double(std::llabs(std::int64_t(r.waited_calls) - (got.calls_moving - (got.last_moved ? 1 : 0)))), 0.0);
            add(rows, "tiers", what + ": stalled calls > waited calls, or a negative stall",
                r.stalled_calls > r.waited_calls || r.stall_seconds < 0 ? 1.0 : 0.0, 0.0);
            if (r.waited_calls > 0)  // copies a later call waited for: the copy stream was busy
                add(rows, "tiers", what + ": copy stream time with moves (1 = none)", r.copy_seconds > 0 ? 0.0 : 1.0, 0.0);
            if (cf.every_call)  // moves every step: the copies of each pass land before the next call reads
                add(rows, "tiers", what + ": calls after which nothing moved", double(got.calls - got.calls_moving), 0.0);
            std::printf("tiers: %s: %.3f ms a decode step; %s\n", what.c_str(), got.step_ms(), r.summary().c_str());
            if (&cf == &configs.front()) {
                resident = r.inputs.resident_bytes;
                std::printf("tiers: %s\n", r.describe().c_str());
                add(rows, "tiers", label + ": move_expert on a tiered model: usage error",
                    usage_error([&] { g.move_expert(0, 0, g.expert_extent(0, 1).address); }), 0.0);
            }
        } catch (const std::exception& e) {
            rows.push_back({"tiers", what + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    // No slab cap: a --gpu-mib cap the model does not fit under tiers it by itself. With the
    // headroom 0, room for half the experts and part of another; then with no tier flag at all
    // (what `aff-run -m` does on a card smaller than the model; --gpu-mib stands in for the
    // card): the headroom derived, the slab taking what is left after the resident part and
    // the headroom, a third of the experts.
    auto below_the_model = [&](const std::string& what, std::int64_t room, std::optional<std::size_t> headroom) {
        try {
            aff::gpu::GpuOptions o;
            const std::size_t h = headroom ? *headroom : aff::placement::derived_headroom(resident + 256 * aff::placement::kMiB);
            o.memory_cap_bytes = std::size_t(resident) + h + std::size_t(room) * slot_bytes + slot_bytes / 2;
            o.tiers.headroom = headroom;
            aff::gpu::GpuModel g(*cpu, &reader, o);
            const Run got = run(g, sc, false);
            const aff::gpu::GpuTierReport r = g.tiers();
            add(rows, "tiers", what + ": floats differing", double(differ(got, want)), 0.0);
            add(rows, "tiers", what + ": tiered because it does not fit (1 = no)",
                r.tiered && r.why.find("the model needs") != std::string::npos ? 0.0 : 1.0, 0.0);
            if (!headroom)
                add(rows, "tiers", what + ": |headroom - derived_headroom(budget)| MiB",
                    double(std::llabs(std::int64_t(r.plan.headroom) - std::int64_t(aff::placement::derived_headroom(r.plan.gpu_budget)))) /
                        double(aff::placement::kMiB),
                    0.0);
            add(rows, "tiers", what + ": |slab slots - room|", double(std::llabs(r.plan.gpu_slots - room)), 0.0);
            add(rows, "tiers", what + ": |table in slab - room|", double(std::llabs(r.on_gpu - room)), 0.0);
            add(rows, "tiers", what + ": |pool slots - the rest|", double(std::llabs(r.plan.host_slots - (experts - room))), 0.0);
            std::printf("tiers: %s: %.3f ms a decode step; %s\n", what.c_str(), got.step_ms(), r.summary().c_str());
        } catch (const std::exception& e) {
            rows.push_back({"tiers", what + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    };
    if (resident > 0) {
        const std::int64_t half = experts / 2, third = std::max<std::int64_t>(1, experts / 3);
        below_the_model(label + ", --gpu-mib below the model (room for " + std::to_string(half) + " slots)", half, 0);
        below_the_model(label + ", a card smaller than the model, no tier flag (room for " + std::to_string(third) + " slots)",
                        third, std::nullopt);
    }
    // Refusals.
    {
        aff::gpu::GpuOptions o;
        o.tiers.slab_cap = slot_bytes;  // (experts left for the SSD: ssd_tier_test.cpp)
        o.tiers.strategy = "belady";
        add(rows, "tiers", label + ": --placement-strategy belady: usage error",
            usage_error([&] { aff::gpu::GpuModel g(*cpu, &reader, o); }), 0.0);
        o.tiers.strategy = "nonesuch";
        add(rows, "tiers", label + ": an unknown strategy: usage error",
            usage_error([&] { aff::gpu::GpuModel g(*cpu, &reader, o); }), 0.0);
    }
}

// The prefill GEMMs' staging (GpuOptions::prefill_staging, kernels/expert_stage.hpp): a long
// chunk (kLongChunk tokens, every row's logits), two decode steps and a short chunk on the
// all-resident model, then on tiered ones (no slab; half the experts in the slab; no slab with
// 2 staging slots, so that some bus-read experts stay in place; no slab and the pool capped at
// a quarter of the experts, the rest on the SSD), staging on, off and automatic. Rows: every
// logit the all-resident model's bit for bit; off stages nothing; on and automatic stage some
// expert when the pool holds any; every mode sees the same bus-read tiles (staged + in place:
// the routing is the same); automatic stages as on in the long chunk and nothing in the short
// one (its experts have one tile of jobs at most); at most the
// slots a call, per layer and GEMM call. On TQ2875R experts (moe_gemv, no GEMM) the same logits
// and nothing staged or counted.
constexpr int kLongChunk = 512;

// gemm false: the layers stay on moe_gemv (TQ2875R experts): nothing is staged nor counted.
void staging_on(const std::string& label, const std::string& path, bool gemm, std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    std::vector<std::int32_t> chunk, shorter, steps;
    aff::gpu::GpuTierReport after_long;  // the counters after the long chunk
    auto run_calls = [&](aff::gpu::GpuModel& g, bool reference) {
        std::vector<std::vector<float>> out;
        const int V = g.config().vocab_size;
        aff::gpu::GpuDecodeState st = g.new_state();
        out.push_back(g.forward(st, chunk, true));
        if (!reference) after_long = g.tiers();
        for (int s = 0; s < 2; ++s) {
            if (reference) steps.push_back(argmax_last(out.back(), V));
            const std::int32_t one[1] = {steps[std::size_t(s)]};
            out.push_back(g.forward(st, one, false));
        }
        out.push_back(g.forward(st, shorter, true));
        return out;
    };
    std::vector<std::vector<float>> want;
    std::size_t slot_bytes = 0;
    std::int64_t experts = 0;
    int layers = 0;
    {
        aff::gpu::GpuModel g(*cpu, &reader, {});
        const aff::ModelConfig& c = g.config();
        layers = c.num_layers;
        experts = std::int64_t(c.num_layers) * c.n_routed_experts;
        chunk = random_tokens(kLongChunk, c.vocab_size);
        shorter = random_tokens(kChunk, c.vocab_size);
        want = run_calls(g, true);
        slot_bytes = tier_slot_bytes(g);
    }
    struct Case {
        const char* name;
        std::int64_t slab;      // slots
        std::int64_t pool = -1; // slots; -1: the rest
        int stage_slots = 32;
    };
    const Case cases[] = {{"no slab", 0}, {"half in the slab", experts / 2}, {"no slab, 2 staging slots", 0, -1, 2},
                          {"no slab, a quarter in the pool, the rest on the SSD", 0, std::max<std::int64_t>(1, experts / 4)}};
    using aff::gpu::PrefillStaging;
    for (const Case& k : cases) {
        std::uint64_t tiles_off = 0, staged_on_long = 0;
        for (const auto& [mode, mode_name] : {std::pair{PrefillStaging::off, "off"}, std::pair{PrefillStaging::on, "on"},
                                              std::pair{PrefillStaging::automatic, "automatic"}}) {
            const std::string what = label + ", prefill staging " + mode_name + ", " + k.name;
            try {
                aff::gpu::GpuOptions o;
                o.tiers.slab_cap = std::size_t(k.slab) * slot_bytes;
                if (k.pool >= 0) o.tiers.host_pool = std::size_t(k.pool) * slot_bytes;
                o.tiers.strategy = "static";
                o.prefill_staging = mode;
                o.prefill_stage_slots = k.stage_slots;
                aff::gpu::GpuModel g(*cpu, &reader, o);
                const auto a = std::chrono::steady_clock::now();
                const std::vector<std::vector<float>> got = run_calls(g, false);
                const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
                const aff::gpu::GpuTierReport r = g.tiers();
                add(rows, "tiers", what + ": floats differing", double(differ(got, want)), 0.0);
                add(rows, "tiers", what + ": tiered", r.tiered ? 0.0 : 1.0, 0.0);
                const std::uint64_t tiles = r.staged_tiles + r.in_place_tiles;
                if (!gemm) {
                    add(rows, "tiers", what + ": (moe_gemv) experts staged + tiles counted", double(r.staged_experts + tiles), 0.0);
                    std::printf("tiers: %s: %.1f ms for the calls\n", what.c_str(), ms);
                    continue;
                }
                add(rows, "tiers", what + ": bus-read tiles seen (1 = none)", tiles > 0 ? 0.0 : 1.0, 0.0);
                if (mode == PrefillStaging::off) {
                    tiles_off = tiles;
                    add(rows, "tiers", what + ": experts staged", double(r.staged_experts), 0.0);
                } else {
                    add(rows, "tiers", what + ": |bus-read tiles - off's|", double(std::llabs(std::int64_t(tiles) - std::int64_t(tiles_off))), 0.0);
                    add(rows, "tiers", what + ": experts staged (1 = none)", r.staged_experts > 0 ? 0.0 : 1.0, 0.0);
                    // Two GEMM calls (the long and the short chunk), each layer staging at most its slots.
                    add(rows, "tiers", what + ": staged experts over the slots of every layer and call",
                        r.staged_experts > std::uint64_t(2) * std::uint64_t(layers) * std::uint64_t(k.stage_slots) ? 1.0 : 0.0, 0.0);
                }
                if (mode == PrefillStaging::on) staged_on_long = after_long.staged_experts;
                if (mode == PrefillStaging::automatic) {
                    // The long chunk (kStageEveryFrom tokens or more) stages as on does; the short
                    // one only experts of two tiles or more, which its 6 tokens cannot give.
                    static_assert(kLongChunk >= aff::gpu::kStageEveryFrom);
                    add(rows, "tiers", what + ": |long chunk's staged experts - on's|",
                        double(std::llabs(std::int64_t(after_long.staged_experts) - std::int64_t(staged_on_long))), 0.0);
                    add(rows, "tiers", what + ": experts staged in the short chunk",
                        double(r.staged_experts - after_long.staged_experts), 0.0);
                }
                std::printf("tiers: %s: %.1f ms for the calls; %s\n", what.c_str(), ms, r.summary().c_str());
            } catch (const std::exception& e) {
                rows.push_back({"tiers", what + " threw: " + e.what(), INFINITY, 0.0, false});
            }
        }
    }
}

// A model whose experts are not codebook-stored (dense stacks): a slab cap changes nothing.
void untiered(const std::string& name, std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    const std::string dir = test_data() + "/models/" + name;
    auto cpu = aff::Model::load(dir, pool);
    const aff::Checkpoint ck(dir);
    Script sc;
    Run want;
    {
        aff::gpu::GpuModel g(*cpu, &ck, {});
        sc.prompt = random_tokens(kPrompt, g.config().vocab_size);
        sc.chunk = random_tokens(kChunk, g.config().vocab_size);
        want = run(g, sc, true);
    }
    aff::gpu::GpuOptions o;
    o.tiers.slab_cap = 1;
    o.tiers.strategy = "demand";
    aff::gpu::GpuModel g(*cpu, &ck, o);
    const Run got = run(g, sc, false);
    add(rows, "tiers", name + " (dense experts), slab cap: not tiered", g.tiers().tiered ? 1.0 : 0.0, 0.0);
    add(rows, "tiers", name + " (dense experts), slab cap: floats differing", double(differ(got, want)), 0.0);
}

}  // namespace

AFF_DEVICE_TEST("tiers") {
    TempDir tmp("tiers");
    aff::ThreadPool pool(0);
    const std::vector<Config> wide = {
        {"every expert", -1, "static"}, {"half", 6, "static"}, {"half", 6, "demand"}, {"half", 6, "heat"},
        {"one slot", 1, "static"},      {"one slot", 1, "demand", true}, {"one slot", 1, "heat"}, {"no slab", 0, "static"},
        {"one slot, prefetch off", 1, "static", false, 0}, {"no slab, prefetch 2", 0, "static", false, 2},
        {"no slab, prefetch off", 0, "static", false, 0}, {"no slab, prefetch 2, bulk copy", 0, "static", false, 2, 2, true},
    };
    try {
        for_each_wide_container(tmp, pool, [&](const std::string& label, const std::string& path) {
            tiers_on(label, path, wide, rows);
            staging_on(label, path, label.find("TQ2875R") == std::string::npos, rows);
        });
    } catch (const std::exception& e) {
        rows.push_back({"tiers", std::string("wide container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    try {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string geo = write_v4_geometry(tmp, "v4-2x16.aff", 2, 16, false, pool);
        std::printf("tiers: V4-Flash geometry, 2 layers of 16 experts written in %.1f s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        tiers_on("V4 geometry 2x16", geo,
                 {{"every expert", -1, "static"}, {"half", 16, "static"}, {"half", 16, "heat"}, {"one slot", 1, "demand", true},
                  {"no slab", 0, "static"}, {"no slab, prefetch 3", 0, "static", false, 3},
                  {"no slab, prefetch 3, full-grid copy", 0, "static", false, 3, 0},
                  {"no slab, prefetch 2, bulk copy on 2 blocks", 0, "static", false, 2, 2, true},
                  {"no slab, prefetch 2, threads' copy", 0, "static", false, 2, 16, false},
                  {"half, prefetch off", 16, "static", false, 0}},
                 rows);
        staging_on("V4 geometry 2x16", geo, true, rows);
    } catch (const std::exception& e) {
        rows.push_back({"tiers", std::string("V4 geometry container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    for (const char* name : {"tiny-a", "tiny-trained"}) {
        try {
            untiered(name, rows);
        } catch (const std::exception& e) {
            rows.push_back({"tiers", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}
