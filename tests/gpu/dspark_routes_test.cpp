// Device test of DSpark's stages' routing on the GPU (GpuModel::dspark_block with a route
// observer: forward_routes.cpp's report_dspark_routes), held to what the CPU reference's
// Model::dspark_block reports on the same rings (formats/route-trace.md §5.1: a block is one
// call of layers L, L + 1, L + 2 over its γ rows, the anchor at the rings' position, then the
// noise token). On the random checkpoint with DSpark stages (every call on the GEMVs, so the
// GPU's activations hold to the CPU's within fp32 orders): a 20-token prompt and two steps
// through the GPU trunk, the device runner's rings and a CPU DsparkState fed the same taps,
// then a block for three anchors on both, each with an observer. Checked: the GPU's events
// are the CPU's in order (three route events and an end a block) with the same layers,
// starts and tokens; the stages' expert ids differ in at most kMaxIdsDiffering of the
// selections (no margins are at hand for the block's routers: fp32 order differences may
// flip a near tie) and, where an id matches, its gate weight within kWeightTolerance; an
// observed block's logits are the unobserved one's bit for bit; the trunk's own calls still
// report their main layers only.
#include "device_test.hpp"
#include "route_events.hpp"
#include "wide_container.hpp"

#include "../common/dspark_helpers.hpp"
#include "../common/random_dspark_checkpoint.hpp"
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/model/route_observer.hpp"
#include "libaff/runtime/dspark_runner.hpp"
#include "libaff/runtime/gpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_sequence.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace aff::gpu::test;

namespace {

constexpr double kMaxIdsDiffering = 0.02;  // share of selections (route_trace_device.sh's exact-path bound)
constexpr double kWeightTolerance = 1e-4;  // a matching expert's gate weight, absolute

void check_block_routes(const aff::Model& cpu, const aff::Checkpoint& ck, std::vector<Row>& rows) {
    const aff::ModelConfig& c = cpu.config();
    const int L = c.num_layers, V = c.vocab_size;
    aff::gpu::GpuOptions o;
    o.gemm_min_tokens = 0;
    auto seq = aff::make_gpu_sequence(cpu, &ck, o);
    std::string why;
    std::unique_ptr<aff::DsparkRunner> runner = aff::make_gpu_dspark_runner(cpu, *seq, why);
    if (!runner || runner->stages().find("stages on the GPU") != 0) {
        rows.push_back({"dspark_routes", "no device-stage runner: " + (runner ? runner->stages() : why), INFINITY, 0.0, false});
        return;
    }
    aff::gpu::GpuModel& g = dynamic_cast<aff::GpuTrunk&>(*seq).gpu_model();
    const std::vector<std::int32_t> toks = random_tokens(22, V);
    aff::DsparkState want = cpu.new_dspark_state();
    EventLog trunk_log;
    {
        aff::test::RingFeed feed(*runner, &cpu, &want);
        seq->forward(std::span(toks).first(20), false);
        g.set_route_observer(&trunk_log);  // a trunk call reports its main layers only
        seq->forward(std::span(toks).subspan(20, 1), false);
        g.set_route_observer(nullptr);
        seq->forward(std::span(toks).subspan(21, 1), false);
    }
    int beyond = 0;
    for (const Event& e : trunk_log.events) beyond += e.layer >= L;
    add(rows, "dspark_routes", "a trunk step's events: main layers only (" + std::to_string(trunk_log.events.size()) + " events)",
        trunk_log.events.size() == std::size_t(L) + 1 && beyond == 0 ? 0.0 : 1.0, 0.0);

    long long ids_total = 0, ids_differing = 0, event_mismatch = 0, logit_bits = 0;
    double worst_weight = 0;
    for (std::int32_t anchor : {toks.back(), toks[3], std::int32_t(V - 1)}) {
        runner->block(anchor);
        const std::vector<float> plain = runner->guess_logits(0, anchor);
        EventLog gpu_log, cpu_log;
        g.set_route_observer(&gpu_log);
        runner->block(anchor);
        g.set_route_observer(nullptr);
        logit_bits += differing(runner->guess_logits(0, anchor), plain);
        want.routes = &cpu_log;
        cpu.dspark_block(want, anchor);
        want.routes = nullptr;
        const std::size_t stages = want.stages.size();
        if (gpu_log.events.size() != stages + 1 || cpu_log.events.size() != stages + 1) {
            event_mismatch += 1000;
            continue;
        }
        for (std::size_t i = 0; i < gpu_log.events.size(); ++i) {
            const Event &a = gpu_log.events[i], &b = cpu_log.events[i];
            const int layer = i < stages ? L + int(i) : -1;
            event_mismatch += a.layer != b.layer || a.layer != layer || a.start != b.start || a.tokens != b.tokens ||
                              a.ids.size() != b.ids.size() || a.weights.size() != a.ids.size();
            if (a.ids.size() != b.ids.size() || a.weights.size() != a.ids.size() || b.weights.size() != b.ids.size()) continue;
            for (std::size_t j = 0; j < a.ids.size(); ++j) {
                ++ids_total;
                if (a.ids[j] != b.ids[j]) {
                    ++ids_differing;
                    continue;
                }
                worst_weight = std::max(worst_weight, double(std::fabs(a.weights[j] - b.weights[j])));
            }
        }
        // The block's rows: the anchor at the rings' position, then the noise token.
        const Event& first = gpu_log.events.front();
        event_mismatch += first.start != want.position || first.tokens.empty() || first.tokens.front() != anchor ||
                          std::count(first.tokens.begin() + 1, first.tokens.end(), c.dspark.noise_token_id) !=
                              std::ptrdiff_t(first.tokens.size()) - 1 ||
                          int(first.tokens.size()) != c.dspark.block_size;
    }
    add(rows, "dspark_routes", "blocks' events vs the CPU's (layers L..L+2 and an end, starts, tokens), differing",
        double(event_mismatch), 0.0);
    add(rows, "dspark_routes",
        "stages' expert ids vs the CPU's, share differing (" + std::to_string(ids_differing) + " of " +
            std::to_string(ids_total) + ")",
        ids_total ? double(ids_differing) / double(ids_total) : INFINITY, kMaxIdsDiffering);
    add(rows, "dspark_routes", "matching experts' gate weights vs the CPU's (max abs diff)", worst_weight, kWeightTolerance);
    add(rows, "dspark_routes", "an observed block's logits vs the unobserved's, floats differing", double(logit_bits), 0.0);
}

}  // namespace

AFF_DEVICE_TEST("dspark_routes") {
    aff::ThreadPool pool(0);
    TempDir tmp("dspark_routes");
    const std::string dir = tmp / "tiny-dspark";
    try {
        aff::test::write_random_dspark_checkpoint(dir, 3);
        auto cpu = aff::Model::load(dir, pool);
        const aff::Checkpoint ck(dir);
        check_block_routes(*cpu, ck, rows);
    } catch (const std::exception& e) {
        rows.push_back({"dspark_routes", std::string("random DSpark checkpoint threw: ") + e.what(), INFINITY, 0.0, false});
    }
}
