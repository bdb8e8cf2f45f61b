// Tests that a verify call (formats/route-trace.md §5.1: one step of k + 1 tokens, phase
// draft-verify) costs the placement engine what a batched call costs: each layer reads the
// union of its tokens' experts once. A hand-made trace of three verify tokens against the
// same tokens run as three decode steps, replayed through aff-trace's replay
// (libaff/trace/replay) with every expert on SSD and with every expert on the GPU; the counts
// are worked out in the comments. Draft steps (the MTP layer's, layer L) are left out of a
// replay: its experts are not the tier engine's.
#include "libaff/trace/replay.hpp"
#include "libaff/trace/route_trace_writer.hpp"

#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>
#include <vector>

using namespace aff;
using namespace aff::trace;

namespace {

constexpr std::uint64_t kExpertBytes = 1000;

// Two layers of 8 experts, top-2. Token i chooses layer0[i] in layer 0 and layer1[i] in layer 1.
using Choices = std::vector<std::vector<std::uint16_t>>;
const Choices kLayer0 = {{3, 5}, {3, 6}, {5, 3}};  // union {3, 5, 6}
const Choices kLayer1 = {{1, 2}, {1, 2}, {2, 1}};  // union {1, 2}

TraceHeader header() {
    TraceHeader h;
    h.layers = 2;
    h.experts = 8;
    h.top_k = 2;
    h.identity_kind = IdentityKind::synthetic;
    h.expert_bytes = kExpertBytes;
    h.hash_layers = {false, false};
    return h;
}

// Tokens [first, last) of the choices as one step of `phase`.
TraceStep step_of(std::size_t first, std::size_t last, Phase phase) {
    TraceStep s;
    for (std::size_t i = first; i < last; ++i) s.tokens.push_back({40 + std::uint32_t(i), 0, 10 + std::uint32_t(i), phase});
    s.layers = {0, 1};
    for (const Choices* layer : {&kLayer0, &kLayer1})
        for (std::size_t i = first; i < last; ++i)
            for (std::uint16_t e : (*layer)[i]) {
                s.experts.push_back(e);
                s.weights.push_back(0.75f);
            }
    return s;
}

// Written and read back, as aff-trace replay gets it.
RouteTrace through_file(const std::vector<TraceStep>& steps) {
    test::TempDir dir;
    RouteTraceWriter w(dir / "t.aft", header(), Compression::none);
    for (const TraceStep& s : steps) w.add(s);
    w.publish();
    return read_route_trace(dir / "t.aft");
}

ReplayResult replay_static(const RouteTrace& t, std::uint64_t gpu_bytes) {
    ReplayOptions o;
    o.gpu_bytes = {gpu_bytes};
    o.policies = {"static"};
    const std::vector<ReplayResult> r = replay(t, o);
    REQUIRE(r.size() == 1);
    return r.front();
}

}  // namespace

TEST_CASE("a verify step reads the union of its tokens' experts once per layer", "[placement]") {
    const RouteTrace verify = through_file({step_of(0, 3, Phase::draft_verify)});
    const RouteTrace single = through_file({step_of(0, 1, Phase::decode), step_of(1, 2, Phase::decode),
                                            step_of(2, 3, Phase::decode)});
    REQUIRE(verify.steps.front().tokens.front().phase == Phase::draft_verify);

    SECTION("the dispatches: one per layer, its distinct experts with the tokens that chose each") {
        const DispatchList d = dispatches_of(verify, 0);
        REQUIRE(d.size() == 2);
        // Layer 0: experts 3 (3 tokens), 5 (2), 6 (1); layer 1: 1 (3), 2 (3). Keys are layer * 8 + e.
        CHECK(std::vector<placement::ExpertKey>(d.keys.begin(), d.keys.end()) ==
              std::vector<placement::ExpertKey>{3, 5, 6, 9, 10});
        CHECK(std::vector<std::uint32_t>(d.tokens.begin(), d.tokens.end()) == std::vector<std::uint32_t>{3, 2, 1, 3, 3});
        CHECK(d.begin == std::vector<std::uint64_t>{0, 3, 5});
        CHECK(d.token_steps == 3);
        CHECK(dispatches_of(single, 0).size() == 6);
    }
    SECTION("nothing on the GPU: each distinct expert of a dispatch is one SSD read and one PCIe stream") {
        const ReplayResult v = replay_static(verify, 0), s = replay_static(single, 0);
        // The verify call: 3 + 2 distinct experts. Three single steps: 2 + 2 + 2 in each layer.
        CHECK(v.counters.dispatches == 2);
        CHECK(v.counters.accesses == 5);
        CHECK(v.counters.ssd_reads == 5);
        CHECK(v.counters.ssd_bytes == 5 * kExpertBytes);
        CHECK(v.counters.pcie_bytes == 5 * kExpertBytes);
        CHECK(v.counters.selections == 12);  // 3 tokens x 2 experts x 2 layers, either way
        CHECK(s.counters.dispatches == 6);
        CHECK(s.counters.accesses == 12);
        CHECK(s.counters.ssd_bytes == 12 * kExpertBytes);
        CHECK(s.counters.selections == 12);
        CHECK(v.pcie_bytes_per_token() == Approx(5.0 * kExpertBytes / 3));
    }
    SECTION("draft steps are left out: the same dispatches and tokens as without them") {
        TraceStep draft;
        draft.tokens = {{40, 0, 9, Phase::draft}, {41, 0, 10, Phase::draft}};
        draft.layers = {2};
        draft.experts = {0, 1, 2, 3};
        draft.weights = {1, 1, 1, 1};
        const RouteTrace with = through_file({draft, step_of(0, 3, Phase::draft_verify), draft});
        REQUIRE(with.steps.size() == 3);
        const DispatchList a = dispatches_of(with, 0), b = dispatches_of(verify, 0);
        CHECK(a.keys == b.keys);
        CHECK(a.tokens == b.tokens);
        CHECK(a.token_steps == 3);
        CHECK(std::vector<std::uint64_t>(a.step.begin(), a.step.end()) == std::vector<std::uint64_t>{1, 1});
        CHECK(replay_static(with, 0).counters.accesses == 5);
    }
    SECTION("everything on the GPU: each distinct expert is read from HBM once") {
        const ReplayResult v = replay_static(verify, 16 * kExpertBytes), s = replay_static(single, 16 * kExpertBytes);
        CHECK(v.counters.gpu_hits == 5);
        CHECK(v.counters.hbm_bytes == 5 * kExpertBytes);
        CHECK(v.counters.selection_gpu_hits == 12);
        CHECK(v.counters.pcie_bytes == 0);
        CHECK(s.counters.gpu_hits == 12);
        CHECK(s.counters.hbm_bytes == 12 * kExpertBytes);
    }
}
