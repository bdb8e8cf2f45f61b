// Device test of prefix snapshots (libaff/gpu/forward.hpp, GpuModel::snapshot/restore, and
// the GPU Sequence's, libaff/runtime/gpu_sequence.hpp), on every tiny fixture with attention
// on the GPU and on tiny-a with attention on the CPU:
//   restore: a snapshot taken after prompt P, restored into a state that meanwhile ran
//     another sequence, then forward(rest) and greedy decode steps, gives the logits a fresh
//     state gives through the same calls (P, rest, the steps), bit for bit (floats differing,
//     bound 0). P of 3 tokens (GEMV path) and of 37 (GEMM path, past the sliding window
//     and several CSA/HCA windows), rests of 6 (GEMM) and 2 (GEMV) tokens.
//   end of generation: a snapshot after the decode steps, restored elsewhere, decodes on
//     as the original does (bit for bit).
//   size: the snapshot holds the position's bytes, not max_context's: between the sum of
//     the ring rows, compressor windows and entries the position uses (computed here from
//     the config) and that sum plus one alignment (256 bytes) per region.
//   refusals: a snapshot of another model, a CPU snapshot into the GPU backend: usage errors.
//   rewind (libaff/runtime/gpu_sequence.hpp): a rewound GPU sequence continues as a fresh one
//     making the same calls, bit for bit; a rewind past its depth is refused.
#include "device_test.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/runtime/open_sequence.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <span>

using namespace aff::gpu::test;

namespace {

constexpr int kSteps = 12;  // decode steps after the rest: crosses ratio-4 windows and a W=16 wrap

// P, then rest, then kSteps greedy steps on a fresh state; the same after restoring P's
// snapshot into a state that ran another sequence; then the end-of-generation snapshot.
void restore_matches(const std::string& name, aff::gpu::GpuModel& g, int p_len, int rest_len,
                     std::vector<Row>& rows) {
    const int V = g.config().vocab_size;
    const std::vector<std::int32_t> prompt = random_tokens(p_len, V), rest = random_tokens(rest_len, V);
    const std::string what = name + " P=" + std::to_string(p_len) + " rest=" + std::to_string(rest_len);

    aff::gpu::GpuDecodeState fresh = g.new_state(), snapped = g.new_state();
    g.forward(fresh, prompt, false);
    g.forward(snapped, prompt, false);
    const aff::gpu::GpuStateSnapshot snap = g.snapshot(snapped);
    std::vector<std::vector<float>> want{g.forward(fresh, rest, true)};
    std::vector<std::int32_t> steps;
    for (int s = 0; s < kSteps; ++s) {
        steps.push_back(argmax_last(want.back(), V));
        const std::int32_t one[1] = {steps.back()};
        want.push_back(g.forward(fresh, one, false));
    }

    aff::gpu::GpuDecodeState other = g.new_state();
    g.forward(other, random_tokens(45, V), false);  // another request's ring, windows and entries
    g.forward(other, random_tokens(2, V), false);
    g.restore(other, snap);
    long long diff = other.position == p_len ? 0 : 1;
    diff += differing(g.forward(other, rest, true), want[0]);
    for (int s = 0; s < kSteps; ++s) {
        const std::int32_t one[1] = {steps[s]};
        diff += differing(g.forward(other, one, false), want[s + 1]);
    }
    add(rows, "snapshot", what + ": restored vs fresh, floats differing", double(diff), 0.0);

    // The end of the generation, restored into the state that ran P only, decodes on alike.
    const aff::gpu::GpuStateSnapshot end = g.snapshot(fresh);
    g.restore(snapped, end);
    long long diff_end = snapped.position == fresh.position ? 0 : 1;
    std::int32_t next = argmax_last(want.back(), V);
    for (int s = 0; s < 5; ++s) {
        const std::int32_t one[1] = {next};
        const std::vector<float> a = g.forward(fresh, one, false), b = g.forward(snapped, one, false);
        diff_end += differing(b, a);
        next = argmax_last(a, V);
    }
    add(rows, "snapshot", what + ": end-of-generation restore, 5 steps differing", double(diff_end), 0.0);

    // Size: what the position uses, not the state buffer.
    int regions = 0;
    const std::size_t lo = state_bytes_used(g.config(), p_len, regions);
    const std::size_t got = snap.device.size();
    const bool on_gpu = g.memory_plan().state_bytes > 0;
    if (on_gpu) {
        const bool fits = got >= lo && got <= lo + std::size_t(regions) * 256 && got < g.memory_plan().state_bytes;
        add(rows, "snapshot",
            what + ": bytes " + std::to_string(got) + " in [" + std::to_string(lo) + ", +" +
                std::to_string(regions * 256) + "] of " + std::to_string(g.memory_plan().state_bytes),
            fits ? 0.0 : 1.0, 0.0);
    } else {
        add(rows, "snapshot", what + ": CPU attention: no device bytes, CPU state copied",
            got == 0 && snap.attention.position == p_len ? 0.0 : 1.0, 0.0);
    }
}

void check(const std::string& name, const aff::Model& cpu, const aff::Checkpoint* ck, bool cpu_attention,
           std::vector<Row>& rows) {
    try {
        aff::gpu::GpuOptions o;
        o.cpu_attention = cpu_attention;
        aff::gpu::GpuModel g(cpu, ck, o);
        restore_matches(name, g, 3, 6, rows);
        restore_matches(name, g, 37, 2, rows);
    } catch (const std::exception& e) {
        rows.push_back({"snapshot", name + " threw: " + e.what(), INFINITY, 0.0, false});
    }
}

}  // namespace

AFF_DEVICE_TEST("snapshot") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        const std::string dir = test_data() + "/models/" + name;
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        check(name, *cpu, &ck, false, rows);
        if (std::string(name) == "tiny-a") check("tiny-a (CPU attention)", *cpu, &ck, true, rows);
    }

    // Through the GPU Sequence (open_sequence), as the server uses it.
    const std::string dir = test_data() + "/models/tiny-a";
    auto cpu = aff::Model::load(dir, pool);
    aff::BackendOptions on_gpu, on_cpu;
    on_gpu.gpus = 1;
    on_cpu.gpus = 0;
    auto gb = aff::open_sequence(*cpu, dir, on_gpu, {});
    auto cb = aff::open_sequence(*cpu, dir, on_cpu, {});
    const int V = cpu->config().vocab_size;
    const std::vector<std::int32_t> prompt = random_tokens(20, V), rest = random_tokens(3, V);
    gb->forward(prompt, false);
    const auto snap = gb->snapshot();
    const std::vector<float> want = gb->forward(rest, true);
    gb->reset();
    gb->forward(random_tokens(7, V), false);
    gb->restore(*snap);
    const bool ok = gb->can_snapshot() && snap->position() == 20 && gb->position() == 20;
    add(rows, "snapshot", "backend: restored, rest's logits differing",
        ok ? double(differing(gb->forward(rest, true), want)) : INFINITY, 0.0);
    int regions = 0;
    const std::size_t lo = state_bytes_used(cpu->config(), 20, regions);
    add(rows, "snapshot", "backend: bytes() " + std::to_string(snap->bytes()) + " counts the copy (" +
                              std::to_string(lo) + "+)",
        snap->bytes() >= lo && snap->bytes() <= lo + std::size_t(regions) * 256 + 4096 ? 0.0 : 1.0, 0.0);
    cb->forward(prompt, false);
    const auto cpu_snap = cb->snapshot();
    add(rows, "snapshot", "backend: a CPU snapshot into the GPU backend: usage error",
        usage_error([&] { gb->restore(*cpu_snap); }), 0.0);
    // Rewind through the GPU Sequence (its undo records: device copies, recycled once the log
    // drops them): decode steps rewound by 3, then a call of 6 rewound into its middle (the
    // first 3 run again as their own call), against a fresh sequence making the calls that
    // reach the same positions; a rewind past the depth is refused. The fresh one keeps the
    // same depth: while a sequence keeps undo records all its calls take the GEMVs
    // (gpu_sequence.hpp), so at depth 0 its prompt of 20 would take the GEMMs and every
    // float after it would differ for that reason alone.
    {
        auto rs = aff::open_sequence(*cpu, dir, on_gpu, {});
        auto fr = aff::open_sequence(*cpu, dir, on_gpu, {});
        rs->set_rewind_depth(8);
        fr->set_rewind_depth(8);
        const std::vector<std::int32_t> p20 = random_tokens(20, V), steps = random_tokens(5, V),
                                         six = random_tokens(6, V), next = random_tokens(2, V);
        rs->forward(p20, false);
        for (std::int32_t t : steps) rs->forward(std::span(&t, 1), false);
        rs->rewind(22);
        fr->forward(p20, false);
        for (int i = 0; i < 2; ++i) fr->forward(std::span(&steps[std::size_t(i)], 1), false);
        long long diff = rs->position() == 22 ? 0 : 1;
        diff += differing(rs->forward(next, true), fr->forward(next, true));
        rs->forward(six, false);
        rs->rewind(27);
        fr->forward(std::span(six).first(3), false);
        diff += rs->position() == 27 ? 0 : 1;
        diff += differing(rs->forward(next, true), fr->forward(next, true));
        add(rows, "snapshot", "sequence rewind: 3 decode steps back, into a call of 6: floats differing",
            double(diff), 0.0);
        add(rows, "snapshot", "sequence rewind past the depth: usage error",
            usage_error([&] { rs->rewind(rs->position() - 9); }), 0.0);
    }
    aff::gpu::GpuModel g1(*cpu, nullptr, {}), g2(*cpu, nullptr, {});
    aff::gpu::GpuDecodeState s1 = g1.new_state(), s2 = g2.new_state();
    g1.forward(s1, prompt, false);
    const aff::gpu::GpuStateSnapshot other = g1.snapshot(s1);
    add(rows, "snapshot", "another model's snapshot: usage error", usage_error([&] { g2.restore(s2, other); }), 0.0);
}
