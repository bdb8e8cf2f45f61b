// Device test of the SSD tier (libaff/gpu/ssd_tier.hpp): codebook-stored experts in neither the
// GPU slab nor the pinned host pool are read from the container file into pinned staging slots
// when a layer routes to them, and the same kernels read them there; the logits must be the
// all-resident model's bit for bit. On the wide random container (TQ2875 and TQ2875R: 3 layers of
// 4 experts, layer 0 hash-routed) and on a 4-layer, 16-expert container of V4-Flash's geometry
// (layers 0-2 hash-routed, 3 learned: both dispatch paths), written under the test's temporary
// folder (tests/gpu/ssd_tier_device.sh points TMPDIR at the disk). The calls: a 37-token prompt
// (the prefill GEMMs), greedy decode steps (graphs asked for: the SSD model turns them off), a
// 3-token chunk (the GEMVs), an 80-token chunk,
// more steps, then two sequences decoded together (batch 2). Configurations: slab and pool capped (GpuTierOptions::slab_cap, host_pool) at none,
// a few or half the experts, the mover static, demand or heat (both moving ones with and without
// a pool; with no profile the experts are placed in key order, so where slab and pool hold a
// layer's worth the first layer, hash-routed, has no SSD expert at load and the mover's drops
// put some there: the read-ahead path after moves). Rows:
//   - every logit equals the reference's bit for bit (floats differing, 0);
//   - the plan is plan_tiers(inputs), its SSD count = experts - slab - pool, and that many table
//     entries are on the SSD at load;
//   - SSD expert reads > 0, their bytes = reads x the container's extent size (read from the file,
//     not copied from the mapped source: the source names the file);
//   - the hash layers' read-ahead issued reads and the learned layers synchronized after their
//     router (where they have SSD experts);
//   - no decode graph captured (graphs off with SSD experts);
//   - the mover runs the strategy asked for (the report names it: no longer held to static);
//   - demand promoted SSD experts into the slab (> 0) where it has a slab, and dropped victims
//     back to the SSD (> 0: the pool is full or absent), which later calls read from the file
//     again (the byte row above counts every read at the extent's size: issue 17's wrong logits
//     came from such a dropped expert read as 0 bytes, its illegal address from the dropped
//     expert's layer, which had no SSD expert at load, never staging it);
//   - heat moved experts (> 0).
// Prints ms per decode step and the end-of-run line for each configuration.
#include "device_test.hpp"
#include "tier_run.hpp"
#include "wide_container.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/placement/tier_plan.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr int kPrompt = 37, kShort = 3, kLong = 80, kStepsBefore = 6, kStepsAfter = 3;

struct Script {
    std::vector<std::int32_t> prompt, short_chunk, long_chunk, steps;  // steps filled by the reference run
};

struct Run : TierRun {
    std::size_t graphs = 0;
};

Run run(aff::gpu::GpuModel& g, Script& sc, bool reference) {
    Run r;
    aff::gpu::GpuDecodeState st = g.new_state();
    r.logits.push_back(g.forward(st, sc.prompt, true));
    for (int s = 0; s < kStepsBefore; ++s) tier_step(g, st, sc.steps, s, reference, r);
    r.logits.push_back(g.forward(st, sc.short_chunk, true));
    r.logits.push_back(g.forward(st, sc.long_chunk, true));
    for (int s = kStepsBefore; s < kStepsBefore + kStepsAfter; ++s) tier_step(g, st, sc.steps, s, reference, r);
    // Two sequences decoded together (the batched GEMVs: the union of their SSD experts staged).
    aff::gpu::GpuDecodeState a = g.new_state(), b = g.new_state();
    r.logits.push_back(g.forward(a, std::span(sc.prompt).first(5), false));
    r.logits.push_back(g.forward(b, std::span(sc.prompt).subspan(5, 4), false));
    aff::gpu::GpuDecodeState* both[2] = {&a, &b};
    for (int s = 0; s < 2; ++s) {
        const std::int32_t toks[2] = {sc.steps[std::size_t(s)], sc.steps[std::size_t(s) + 1]};
        r.logits.push_back(g.decode(both, toks));
    }
    r.graphs = g.graphs_captured();
    return r;
}

struct Config {
    const char* name;
    std::int64_t slab, pool;  // slots
    const char* strategy;
};

void ssd_on(const std::string& label, const std::string& path, bool has_learned_layer, const std::vector<Config>& configs,
            std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const auto container = std::make_shared<const aff::Container>(aff::Container::open(path));
    const aff::ContainerTensorReader reader(container);
    const std::uint64_t extent_size = container->experts().front().size;
    Script sc;
    Run want;
    std::size_t slot_bytes = 0;
    std::int64_t experts = 0;
    {
        aff::gpu::GpuModel g(*cpu, &reader, {});
        const aff::ModelConfig& c = g.config();
        experts = std::int64_t(c.num_layers) * c.n_routed_experts;
        sc.prompt = random_tokens(kPrompt, c.vocab_size);
        sc.short_chunk = random_tokens(kShort, c.vocab_size);
        sc.long_chunk = random_tokens(kLong, c.vocab_size);
        want = run(g, sc, true);
        slot_bytes = tier_slot_bytes(g);
        std::printf("ssd_tier: %s: all resident %.3f ms a decode step, %zu graphs captured\n", label.c_str(), want.step_ms(),
                    want.graphs);
    }
    for (const Config& cf : configs) {
        const std::string what = label + ", " + cf.name + " (" + std::to_string(cf.slab) + " slab, " + std::to_string(cf.pool) +
                                 " pool of " + std::to_string(experts) + ", " + cf.strategy + ")";
        try {
            aff::gpu::GpuOptions o;
            o.tiers.slab_cap = std::size_t(cf.slab) * slot_bytes;
            o.tiers.host_pool = std::size_t(cf.pool) * slot_bytes;
            o.tiers.strategy = cf.strategy;
            o.tiers.heat = eager_heat();  // the heat cases' moves (device_test.hpp says why)
            aff::gpu::GpuModel g(*cpu, &reader, o);
            const aff::gpu::GpuTierReport before = g.tiers();
            const auto t0 = std::chrono::steady_clock::now();
            const Run got = run(g, sc, false);
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const aff::gpu::GpuTierReport r = g.tiers();
            const std::int64_t ssd = experts - cf.slab - cf.pool;
            add(rows, "ssd_tier", what + ": floats differing", double(differ(got, want)), 0.0);
            const aff::placement::TierPlan p = aff::placement::plan_tiers(r.inputs);
            add(rows, "ssd_tier", what + ": plan is plan_tiers(inputs) (1 = no)",
                p.gpu_slots == r.plan.gpu_slots && p.host_slots == r.plan.host_slots && p.ssd_experts == r.plan.ssd_experts &&
                        p.staging_slots == r.plan.staging_slots
                    ? 0.0
                    : 1.0,
                0.0);
            add(rows, "ssd_tier", what + ": |SSD experts - (experts - slab - pool)|", double(std::llabs(r.plan.ssd_experts - ssd)), 0.0);
            add(rows, "ssd_tier", what + ": |table on the SSD at load - SSD experts|", double(std::llabs(before.on_ssd - ssd)), 0.0);
            add(rows, "ssd_tier", what + ": SSD expert reads (0 = none)", r.ssd_reads > 0 ? 0.0 : 1.0, 0.0);
            add(rows, "ssd_tier", what + ": |SSD bytes - reads x extent size|",
                double(std::llabs(std::int64_t(r.ssd_bytes) - std::int64_t(r.ssd_reads * extent_size))), 0.0);
            add(rows, "ssd_tier", what + ": read from the container file (1 = mapped copies)",
                r.ssd_source.find(path) != std::string::npos && r.ssd_source.find("mapped") == std::string::npos ? 0.0 : 1.0, 0.0);
            add(rows, "ssd_tier", what + ": decode graphs captured", double(got.graphs), 0.0);
            if (cf.slab == 0 && cf.pool == 0) {
                add(rows, "ssd_tier", what + ": hash layers' read-ahead reads (0 = none)", r.ssd_read_ahead > 0 ? 0.0 : 1.0, 0.0);
                if (has_learned_layer)
                    add(rows, "ssd_tier", what + ": router syncs of the learned layers (0 = none)", r.ssd_syncs > 0 ? 0.0 : 1.0, 0.0);
            }
            add(rows, "ssd_tier", what + ": the mover's strategy is the one asked (1 = not)", r.strategy == cf.strategy ? 0.0 : 1.0,
                0.0);
            if (std::string(cf.strategy) == "demand" && cf.slab > 0) {
                add(rows, "ssd_tier", what + ": demand promoted from the SSD (0 = none)", r.ssd_promoted > 0 ? 0.0 : 1.0, 0.0);
                add(rows, "ssd_tier", what + ": victims dropped back to the SSD (0 = none)", r.counters.drops > 0 ? 0.0 : 1.0, 0.0);
            }
            if (std::string(cf.strategy) == "heat" && cf.slab > 0)
                add(rows, "ssd_tier", what + ": heat moved experts (0 = none)", r.moves > 0 ? 0.0 : 1.0, 0.0);
            std::printf("ssd_tier: %s: %.3f ms a decode step, %.2f s the whole script; %s\n", what.c_str(), got.step_ms(), seconds,
                        r.summary().c_str());
            if (&cf == &configs.front()) std::printf("ssd_tier: %s\n", r.describe().c_str());
        } catch (const std::exception& e) {
            rows.push_back({"ssd_tier", what + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
}

}  // namespace

AFF_DEVICE_TEST("ssd_tier") {
    TempDir tmp("ssd");
    aff::ThreadPool pool(0);
    try {
        for_each_wide_container(tmp, pool, [&](const std::string& label, const std::string& path) {
            ssd_on(label, path, true,
                   {{"all on the SSD", 0, 0, "static"},
                    {"one slab, one pool slot", 1, 1, "static"},
                    {"two slab slots, no pool", 2, 0, "demand"},
                    {"two slab slots, no pool", 2, 0, "heat"},
                    {"two slab, two pool slots", 2, 2, "demand"},
                    {"two slab, two pool slots", 2, 2, "heat"}},
                   rows);
        });
    } catch (const std::exception& e) {
        rows.push_back({"ssd_tier", std::string("wide container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    try {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string geo = write_v4_geometry(tmp, "v4-4x16.aff", 4, 16, false, pool);
        std::printf("ssd_tier: V4-Flash geometry, 4 layers of 16 experts written in %.1f s under %s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), tmp.path.c_str());
        ssd_on("V4 geometry 4x16", geo, true,
               {{"all on the SSD", 0, 0, "static"},
                {"8 slab, 8 pool", 8, 8, "demand"},
                {"8 slab, 8 pool", 8, 8, "heat"},
                {"16 slab, no pool", 16, 0, "demand"},
                {"16 slab, no pool", 16, 0, "heat"}},
               rows);
    } catch (const std::exception& e) {
        rows.push_back({"ssd_tier", std::string("V4 geometry container threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
