// Device test of the GPU rewind (libaff/gpu/forward.hpp: rewind_point, rewind,
// rewind_ranges) on every tiny fixture with attention on the GPU, on tiny-a with attention on
// the CPU, and on the wide codebook-stored container (wide_container.hpp), GEMV path
// (gemm_min_tokens 0: the logits of a call do not depend on how a prompt was cut then):
//   - forward N, rewind to p, forward again: a prompt of 21 tokens, then 8 greedy decode
//     steps (captured graphs) and a 6-token chunk, each call after a rewind point; rewinding
//     through the points newest first back to 24 (3 steps kept), then a 5-token chunk and 3
//     decode steps of other tokens give the logits of a fresh state that ran the prompt, the
//     3 steps and the same calls, bit for bit (floats differing, 0);
//   - a rewind over more than the sliding window: a 30-token chunk rewound, another run in its
//     place, bit for bit as fresh;
//   - a point is few bytes: rewind_ranges of one token hold exactly one ring row a layer and
//     each compressor's windows (computed here from the config), far below the state;
//   - refusals: rewinding a state not at the point's end, or with another model's point:
//     usage errors, the state left as it was (its next step still matches).
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
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

void check(const std::string& name, aff::gpu::GpuModel& g, std::vector<Row>& rows) {
    const int V = g.config().vocab_size;
    auto step = [&](aff::gpu::GpuDecodeState& st, std::int32_t t) {
        const std::int32_t one[1] = {t};
        return g.forward(st, one, false);
    };
    const std::vector<std::int32_t> prompt = random_tokens(21, V), chunk = random_tokens(6, V),
                                     other = random_tokens(5, V);

    // Forward N, rewind to p, forward again.
    aff::gpu::GpuDecodeState st = g.new_state();
    std::vector<float> last = g.forward(st, prompt, false);
    std::vector<aff::gpu::GpuRewindPoint> points;
    std::vector<std::int32_t> steps;
    for (int s = 0; s < 8; ++s) {
        steps.push_back(argmax_last(last, V));
        points.push_back(g.rewind_point(st, 1));
        last = step(st, steps.back());
    }
    points.push_back(g.rewind_point(st, int(chunk.size())));
    g.forward(st, chunk, true);
    for (std::size_t i = points.size(); i-- > 3;) g.rewind(st, points[i]);
    std::vector<std::vector<float>> got{g.forward(st, other, true)}, want;
    aff::gpu::GpuDecodeState fresh = g.new_state();
    g.forward(fresh, prompt, false);
    for (int s = 0; s < 3; ++s) step(fresh, steps[s]);
    want.push_back(g.forward(fresh, other, true));
    for (int s = 0; s < 3; ++s) {
        const std::int32_t t = argmax_last(want.back(), V);
        got.push_back(step(st, t));
        want.push_back(step(fresh, t));
    }
    long long diff = st.position == fresh.position ? 0 : 1;
    for (std::size_t i = 0; i < got.size(); ++i) diff += differing(got[i], want[i]);
    add(rows, "rewind", name + ": 8 steps and a chunk rewound to 24, then other calls: floats differing", double(diff), 0.0);

    // Over more than the sliding window.
    const std::vector<std::int32_t> long_a = random_tokens(30, V), long_b = random_tokens(30, V);
    aff::gpu::GpuRewindPoint p = g.rewind_point(st, 30);
    g.forward(st, long_a, true);
    g.rewind(st, p);
    const std::vector<float> b1 = g.forward(st, long_b, true), b2 = g.forward(fresh, long_b, true);
    add(rows, "rewind", name + ": a 30-token chunk rewound, another in its place: floats differing",
        double(differing(b1, b2)) + (st.position == fresh.position ? 0 : 1), 0.0);

    // Refusals leave the state alone.
    const aff::gpu::GpuRewindPoint stale = g.rewind_point(st, 1);
    step(st, 1);
    step(fresh, 1);
    step(st, 2);
    step(fresh, 2);
    add(rows, "rewind", name + ": rewind with a point whose call is not the last: usage error",
        usage_error([&] { g.rewind(st, stale); }), 0.0);
    add(rows, "rewind", name + ": after the refusal, the next step differs (floats)",
        double(differing(step(st, 3), step(fresh, 3))), 0.0);

    if (g.memory_plan().state_bytes > 0) {
        std::size_t bytes = 0;
        for (const aff::gpu::StateRange& r : g.rewind_ranges(40, 1)) bytes += r.bytes;
        int regions = 0;  // a ring row a layer, each compressor's windows, no entry (1 / ratio = 0)
        const std::size_t want_bytes = state_bytes_used(g.config(), 1, regions);
        add(rows, "rewind",
            name + ": one token's point holds " + std::to_string(bytes) + " bytes (ring rows and windows: " +
                std::to_string(want_bytes) + ", state " + std::to_string(g.memory_plan().state_bytes) + ")",
            bytes >= want_bytes && bytes <= want_bytes + std::size_t(regions) * 256 ? 0.0 : 1.0, 0.0);
    }
}

void run_fixture(const std::string& name, const aff::Model& cpu, const aff::TensorReader* reader, bool cpu_attention,
                 std::vector<Row>& rows) {
    try {
        aff::gpu::GpuOptions o;
        o.cpu_attention = cpu_attention;
        o.gemm_min_tokens = 0;
        aff::gpu::GpuModel g(cpu, reader, o);
        check(name, g, rows);
    } catch (const std::exception& e) {
        rows.push_back({"rewind", name + " threw: " + e.what(), INFINITY, 0.0, false});
    }
}

}  // namespace

AFF_DEVICE_TEST("rewind") {
    aff::ThreadPool pool(0);
    for (const char* name : {"tiny-a", "tiny-a-fp8", "tiny-b", "tiny-c"}) {
        const std::string dir = test_data() + "/models/" + name;
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        run_fixture(name, *cpu, &ck, false, rows);
        if (std::string(name) == "tiny-a") run_fixture("tiny-a (CPU attention)", *cpu, &ck, true, rows);
    }
    try {
        TempDir tmp("rewind");
        write_wide_checkpoint(tmp / "wide");
        const std::string path = tmp / "wide.aff";
        quantize_checkpoint_to(tmp / "wide", path, aff::quant::Rotation::off, pool);
        auto cpu = aff::Model::load(path, pool);
        const aff::ContainerTensorReader reader(std::make_shared<const aff::Container>(aff::Container::open(path)));
        run_fixture("wide TQ2875", *cpu, &reader, false, rows);
    } catch (const std::exception& e) {
        rows.push_back({"rewind", std::string("wide container threw: ") + e.what(), INFINITY, 0.0, false});
    }
    // Another model's point.
    const std::string dir = test_data() + "/models/tiny-a";
    auto cpu = aff::Model::load(dir, pool);
    aff::gpu::GpuModel g1(*cpu, nullptr, {}), g2(*cpu, nullptr, {});
    aff::gpu::GpuDecodeState s1 = g1.new_state(), s2 = g2.new_state();
    const aff::gpu::GpuRewindPoint p = g1.rewind_point(s1, 1);
    g1.forward(s1, random_tokens(1, cpu->config().vocab_size), false);
    add(rows, "rewind", "another model's point: usage error", usage_error([&] { g2.rewind(s2, p); }), 0.0);
}
