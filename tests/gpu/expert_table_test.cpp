// Device test of the expert table (libaff/gpu/forward.hpp: expert_extent, move_expert): the
// kernels find each codebook-stored expert through the table when they run, so an expert can
// move between two replays of a captured decode graph. On the wide random container
// (wide_container.hpp) as TQ2875 (moe_gemm prefill, moe_gemv decode) and TQ2875R (moe_gemv):
//   a reference sequence (a 37-token prompt, greedy decode steps, a 6-token chunk, more steps)
//   on one state; then the same calls on a second state, moving every expert of every layer
//   twice on the way: after decode step 2 into a device buffer (each extent copied there, the
//   table rewritten, the old place filled with 0xff), after step 5 into mapped pinned host
//   memory (PinnedBuffer, the device copies then poisoned too), so the chunk and the later
//   steps read their experts over the bus. Rows:
//   - every logit of the moved run equals the reference's bit for bit (floats differing, 0);
//   - no decode graph was captured after the moved run's first step (the replays saw the
//     table as it was then, not as it was at capture);
//   - expert_extent reports the new addresses;
//   - control: poisoning the pinned copies the table points at changes the next step's logits
//     (a kernel that ignored the table would pass the rows above);
//   - refusals: move_expert on a layer or expert out of range, or a misaligned address: usage
//     errors; on a model with dense experts (tiny-a): a usage error.
#include "device_test.hpp"
#include "wide_container.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/container_tensors.hpp"
#include "libaff/model/forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr int kPrompt = 37, kChunk = 6, kStepsBefore = 8, kStepsAfter = 3;
constexpr int kMoveToDevice = 2, kMoveToHost = 5;  // after these decode steps

// The call sequence: prompt, steps (greedy from the reference's logits), chunk, steps. `between`
// runs after each decode step s (1-based) of the first stretch. Returns every call's logits.
struct Script {
    std::vector<std::int32_t> prompt, chunk, steps;  // steps filled by the reference run
};

std::vector<std::vector<float>> run(aff::gpu::GpuModel& g, Script& sc, bool reference,
                                    const std::function<void(int)>& between) {
    const int V = g.config().vocab_size;
    aff::gpu::GpuDecodeState st = g.new_state();
    std::vector<std::vector<float>> out{g.forward(st, sc.prompt, false)};
    auto step = [&](int i) {
        if (reference) sc.steps.push_back(argmax_last(out.back(), V));
        const std::int32_t one[1] = {sc.steps[i]};
        out.push_back(g.forward(st, one, false));
    };
    for (int s = 0; s < kStepsBefore; ++s) {
        step(s);
        between(s + 1);
    }
    out.push_back(g.forward(st, sc.chunk, true));
    for (int s = kStepsBefore; s < kStepsBefore + kStepsAfter; ++s) step(s);
    return out;
}

void moves(const std::string& label, const std::string& path, std::vector<Row>& rows) {
    aff::ThreadPool pool(0);
    auto cpu = aff::Model::load(path, pool);
    const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
    aff::gpu::GpuModel g(*cpu, &reader, {});  // default options: graphs, GEMM prefill where it applies
    const aff::ModelConfig& c = g.config();
    const int L = c.num_layers, E = c.n_routed_experts, V = c.vocab_size;
    Script sc;
    sc.prompt = random_tokens(kPrompt, V);
    sc.chunk = random_tokens(kChunk, V);
    const std::vector<std::vector<float>> want = run(g, sc, true, [](int) {});

    const std::size_t bytes = g.expert_extent(0, 0).bytes;
    const std::size_t stride = (bytes + 255) / 256 * 256;
    aff::gpu::Buffer on_device(stride * L * E);
    aff::gpu::PinnedBuffer on_host(stride * L * E);
    std::size_t captures_after_first = 0;
    long long wrong_address = 0;
    // Copies every extent to `dst` (device addresses), points the table there, poisons the old place.
    auto move_all = [&](std::uint8_t* dst) {
        aff::gpu::Stream s;
        std::vector<std::pair<void*, std::size_t>> old;
        for (int l = 0; l < L; ++l)
            for (int e = 0; e < E; ++e) {
                const aff::gpu::GpuExpertExtent x = g.expert_extent(l, e);
                std::uint8_t* to = dst + (std::size_t(l) * E + e) * stride;
                s.copy(to, x.address, x.bytes);
                s.synchronize();
                g.move_expert(l, e, to);
                wrong_address += g.expert_extent(l, e).address != to;
                old.emplace_back(const_cast<void*>(x.address), x.bytes);
            }
        for (const auto& [p, n] : old) s.fill(p, 0xff, n);
        s.synchronize();
    };
    const std::vector<std::vector<float>> got = run(g, sc, false, [&](int step) {
        if (step == 1) captures_after_first = g.graphs_captured();
        if (step == kMoveToDevice) move_all(on_device.as<std::uint8_t>());
        if (step == kMoveToHost) move_all(static_cast<std::uint8_t*>(on_host.device_data()));
    });
    long long diff = got.size() == want.size() ? 0 : 1;
    for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) diff += differing(got[i], want[i]);
    add(rows, "expert_table", label + ": moved to device, then pinned host memory: floats differing", double(diff), 0.0);
    add(rows, "expert_table", label + ": decode graphs captured after the first step of the moved run",
        double(g.graphs_captured() - captures_after_first), 0.0);
    add(rows, "expert_table", label + ": expert_extent not at the address moved to", double(wrong_address), 0.0);

    // Control: the table is what the kernels read. Poison where it points, and a step differs.
    {
        aff::gpu::GpuDecodeState st = g.new_state();
        g.forward(st, sc.prompt, false);
        const std::int32_t one[1] = {sc.steps[0]};
        std::memset(on_host.data(), 0xff, on_host.size());
        const std::vector<float> poisoned_step = g.forward(st, one, false);
        add(rows, "expert_table", label + ": poisoning the extents the table points at changes the logits (1 = no)",
            differing(poisoned_step, want[1]) > 0 ? 0.0 : 1.0, 0.0);
    }

    alignas(16) static const std::uint8_t spare[32] = {};
    add(rows, "expert_table", label + ": move_expert, layer out of range: usage error",
        usage_error([&] { g.move_expert(L, 0, on_device.data()); }), 0.0);
    add(rows, "expert_table", label + ": move_expert, expert out of range: usage error",
        usage_error([&] { g.move_expert(0, E, on_device.data()); }), 0.0);
    add(rows, "expert_table", label + ": move_expert, misaligned address: usage error",
        usage_error([&] { g.move_expert(0, 0, spare + 1); }), 0.0);
}

}  // namespace

AFF_DEVICE_TEST("expert_table") {
    TempDir tmp("expert-table");
    aff::ThreadPool pool(0);
    try {
        for_each_wide_container(tmp, pool, [&](const std::string& label, const std::string& path) {
            moves(label, path, rows);
        });
    } catch (const std::exception& e) {
        rows.push_back({"expert_table", std::string("wide container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    // Dense experts (an unquantised checkpoint): no table to move in.
    const std::string dir = test_data() + "/models/tiny-a";
    auto cpu = aff::Model::load(dir, pool);
    const aff::Checkpoint ck(dir);
    aff::gpu::GpuModel g(*cpu, &ck, {});
    add(rows, "expert_table", "tiny-a (dense experts): expert_extent is a usage error",
        usage_error([&] { (void)g.expert_extent(0, 0); }), 0.0);
}
