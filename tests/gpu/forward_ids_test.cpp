// Device test of GpuModel::forward_ids (libaff/gpu/forward.hpp) and the generation loop's
// picks-only mode on the GPU (libaff/runtime/generate.cpp): greedy generation without
// anything that needs the logits brings back ids, not rows of the vocabulary.
//   model: two fresh states make the same calls (a prompt, decode steps replayed from the
//     captured graph, 4-token calls on the GEMVs as verify calls take them), one through
//     forward, one through forward_ids; every pick must be greedy_pick of forward's row,
//     whole vocabulary and a cut of it (1 and V/2 candidates), last row and every row; on
//     every tiny fixture, the TQ2875 model, and the V4-geometry container with its experts
//     tiered (slab of two experts, the rest in the pinned pool, read over the bus).
//   generation: greedy tokens picks-only (no hooks) equal the logits path's (an on_logits
//     hook), without drafts and with MTP drafts of k = 1 and 3 on the GPU (verify calls
//     checked against their rows' device picks).
#include "device_test.hpp"
#include "mtp_run.hpp"
#include "tier_run.hpp"
#include "wide_container.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/greedy_pick.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

std::unique_ptr<aff::Model> make_codebook_test_model(aff::ThreadPool& pool);  // forward_test.cpp

using namespace aff::gpu::test;

namespace {

// The same calls on two fresh states of `g`: forward's rows picked on the host against
// forward_ids' device picks; counts the picks that differ.
long long picks_differ(aff::gpu::GpuModel& g, std::size_t candidates) {
    const int V = g.config().vocab_size;
    aff::gpu::GpuDecodeState a = g.new_state(), b = g.new_state();
    long long differ = 0;
    auto call = [&](const std::vector<std::int32_t>& toks, bool all_rows) {
        const std::vector<float> rows = g.forward(a, toks, all_rows);
        const std::vector<std::int32_t> want = aff::greedy_picks(rows, std::size_t(V), candidates);
        const std::vector<std::int32_t> got = g.forward_ids(b, toks, all_rows, candidates);
        if (got.size() != want.size()) return differ += 1000;
        for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
        return differ;
    };
    call(random_tokens(9, V), true);  // a prompt, every row
    g.set_gemv_calls(false);
    for (int step = 0; step < 6; ++step) call(random_tokens(1, V), false);  // decode steps: the graph
    g.set_gemv_calls(true);  // verify calls, as a drafting sequence runs them
    for (int step = 0; step < 3; ++step) call(random_tokens(4, V), true);
    call(random_tokens(3, V), false);
    g.set_gemv_calls(false);
    return differ;
}

void model_picks(const std::string& name, aff::gpu::GpuModel& g, std::vector<Row>& rows) {
    const std::size_t V = std::size_t(g.config().vocab_size);
    for (const std::size_t candidates : {V, V / 2, std::size_t(1)})
        add(rows, "forward_ids",
            name + ": device picks among " + std::to_string(candidates) + " of " + std::to_string(V) +
                " ids vs greedy_pick of forward's rows, differing",
            double(picks_differ(g, candidates)), 0.0);
    const double refused = usage_error([&] {
        aff::gpu::GpuDecodeState s = g.new_state();
        const std::int32_t one[1] = {0};
        g.forward_ids(s, one, false, 0);
    });
    add(rows, "forward_ids", name + ": 0 candidates refused as a usage error", refused, 0.0);
}

long long tokens_differ(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
    long long d = a.size() == b.size() ? 0 : 1000;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d += a[i] != b[i];
    return d;
}

void generation_picks(const std::string& name, const aff::Model& cpu, const aff::Checkpoint& ck, bool has_mtp,
                      std::vector<Row>& rows) {
    const int V = cpu.config().vocab_size;
    for (int p = 0; p < 2; ++p) {
        aff::GenerateOptions opt;
        opt.prompt = random_tokens(6 + 9 * p, V);
        opt.max_new_tokens = 32;
        opt.sampling.temperature = 0;
        auto logits_seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
        const std::vector<std::int32_t> want = generated(*logits_seq, opt, nullptr, true);
        auto picks_seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
        const std::string what = name + " prompt " + std::to_string(p);
        add(rows, "forward_ids", what + ": greedy tokens picks-only vs the logits path, differing",
            double(tokens_differ(generated(*picks_seq, opt, nullptr, false), want)), 0.0);
        if (!has_mtp) continue;
        for (std::size_t k : {std::size_t(1), std::size_t(3)}) {
            auto seq = aff::make_gpu_sequence(cpu, &ck, aff::gpu::GpuOptions{});
            auto drafter = gpu_drafter(*seq, k);
            aff::GenerateStats stats;
            const std::vector<std::int32_t> got = generated(*seq, opt, drafter.get(), false, &stats);
            add(rows, "forward_ids",
                what + " MTP k=" + std::to_string(k) + " (" + std::to_string(stats.verify_calls) + " verify calls, " +
                    std::to_string(stats.accepted_tokens) + " of " + std::to_string(stats.drafted_tokens) +
                    " accepted): greedy tokens picks-only vs the logits path without drafts, differing",
                stats.verify_calls > 0 ? double(tokens_differ(got, want)) : 1.0, 0.0);
        }
    }
}

void tiered_picks(std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    TempDir tmp("forward-ids");
    const std::string path = write_v4_mtp(tmp, pool);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    aff::gpu::GpuOptions tiered;
    {
        aff::gpu::GpuModel g(*cpu, &reader, {});
        tiered.tiers.slab_cap = 2 * tier_slot_bytes(g);
    }
    aff::gpu::GpuModel g(*cpu, &reader, tiered);
    if (!g.tiers().tiered) {
        add(rows, "forward_ids", "V4 geometry: the slab of two experts tiers the model", 1.0, 0.0);
        return;
    }
    model_picks("V4 geometry, experts tiered (" + std::to_string(g.tiers().on_gpu) + " on the GPU)", g, rows);
}

}  // namespace

AFF_DEVICE_TEST("forward_ids") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c", "tiny-trained"}) {
        try {
            const std::string dir = test_data() + "/models/" + name;
            auto cpu = aff::Model::load(dir, pool);
            const aff::Checkpoint ck(dir);
            {
                aff::gpu::GpuModel g(*cpu, &ck, {});
                model_picks(name, g, rows);
            }
            const std::string n(name);
            generation_picks(name, *cpu, ck, n == "tiny-a-fp8" || n == "tiny-trained", rows);
        } catch (const std::exception& e) {
            rows.push_back({"forward_ids", std::string(name) + " threw: " + e.what(), INFINITY, 0.0, false});
        }
    }
    try {
        auto quantised = make_codebook_test_model(pool);
        aff::gpu::GpuModel g(*quantised, nullptr, {});
        model_picks("synthetic D=I=1024, TQ2875 experts", g, rows);
    } catch (const std::exception& e) {
        rows.push_back({"forward_ids", std::string("TQ2875 model threw: ") + e.what(), INFINITY, 0.0, false});
    }
    try {
        tiered_picks(rows);
    } catch (const std::exception& e) {
        rows.push_back({"forward_ids", std::string("tiered V4 geometry threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
