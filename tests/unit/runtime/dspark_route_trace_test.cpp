// Tests for route traces of generations with DSpark drafts (formats/route-trace.md §5.1): each
// draft block is one draft step recording the three stages as layers L, L + 1, L + 2 over the
// block's γ rows (the anchor at the position the trunk runs it next, then the noise token at
// the positions after it), and the experts and gate weights it records are what the stages'
// routers chose: a direct Model::dspark_block on rings built afresh over the trunk's tokens
// before the anchor, seen by an observer of its own, routes the same. The verify call that
// follows a block starts with the block's anchor at its position.
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/route_phase.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/trace/route_trace.hpp"

#include "common/random_dspark_checkpoint.hpp"
#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace aff;
using trace::Phase;

namespace {

// Every routing event of one call, as the router produced it.
class Collect final : public RouteObserver {
public:
    void on_route(const RouteEvent& e) override {
        layers.push_back(e.layer);
        starts.push_back(e.start);
        tokens.emplace_back(e.tokens.begin(), e.tokens.end());
        experts.emplace_back(e.experts.begin(), e.experts.end());
        weights.emplace_back(e.weights.begin(), e.weights.end());
    }
    void on_forward_end() override { ++ends; }
    std::vector<int> layers;
    std::vector<std::int64_t> starts;
    std::vector<std::vector<std::int32_t>> tokens;
    std::vector<std::vector<int>> experts;
    std::vector<std::vector<float>> weights;
    int ends = 0;
};

}  // namespace

TEST_CASE("Model::dspark_block reports its stages' routing as layers L + s at the block's positions", "[runtime]") {
    test::TempDir dir;
    test::write_random_dspark_checkpoint(dir / "m", 3);
    ThreadPool pool(2);
    auto model = Model::load(dir / "m", pool);
    const ModelConfig& c = model->config();
    const int L = c.num_layers, g = c.dspark.block_size, K = c.experts_per_token;
    DecodeState trunk = model->new_state();
    std::vector<float> taps;
    trunk.taps = &taps;
    const std::vector<std::int32_t> prompt = {0, 17, 300, 45, 999, 12, 8};
    model->forward(trunk, prompt, false);
    DsparkState st = model->new_dspark_state();
    model->dspark_extend(st, taps);
    const DsparkBlock plain = model->dspark_block(st, 77);
    Collect seen;
    st.routes = &seen;
    const DsparkBlock observed = model->dspark_block(st, 77);
    CHECK(observed.logits == plain.logits);  // observing changes nothing
    REQUIRE(seen.layers == std::vector<int>{L, L + 1, L + 2});
    CHECK(seen.ends == 1);  // one call
    std::vector<std::int32_t> ids(std::size_t(g), c.dspark.noise_token_id);
    ids[0] = 77;
    for (std::size_t s = 0; s < 3; ++s) {
        CHECK(seen.starts[s] == std::int64_t(prompt.size()));
        CHECK(seen.tokens[s] == ids);
        REQUIRE(seen.experts[s].size() == std::size_t(g * K));
        for (int e : seen.experts[s]) CHECK((e >= 0 && e < c.n_routed_experts));
    }
    // The stages route differently from one another (their routers are their own).
    CHECK(seen.experts[0] != seen.experts[1]);
}

TEST_CASE("a traced generation with DSpark drafts records each block's stage routing as a draft step", "[runtime]") {
    test::TempDir dir;
    test::write_random_dspark_checkpoint(dir / "m", 3);
    ThreadPool pool(2);
    auto model = Model::load(dir / "m", pool);
    const ModelConfig& c = model->config();
    const std::size_t L = std::size_t(c.num_layers), g = std::size_t(c.dspark.block_size);
    std::vector<std::int32_t> prompt = {0};
    for (int i = 1; i < 14; ++i) prompt.push_back(2 + (i * 37 + i * i * 11) % 1000);

    const std::string path = dir / "d.aft";
    CpuSequence seq(*model);
    DsparkDrafter drafter(*model, seq, 5, 0.0f);  // threshold 0: every block proposes all 5
    trace::RouteRecorder recorder(path, trace::trace_header_for(c, dir / "m"));
    GenerateOptions opt;
    opt.prompt = prompt;
    opt.max_new_tokens = 12;
    opt.sampling.temperature = 0;
    std::vector<std::int32_t> all = prompt;
    GenerateHooks h;
    h.on_step = [&](const GenerationStep& s) {
        all.push_back(s.token);
        return true;
    };
    h.drafter = &drafter;
    seq.set_route_observer(&recorder);
    h.before_dispatch = [&](const Dispatch& d) { recorder.begin(0, route_phase(d.kind)); };
    const GenerateStats stats = generate(seq, opt, h);
    recorder.publish();
    REQUIRE(stats.verify_calls > 0);

    const trace::RouteTrace t = trace::read_route_trace(path);
    const std::uint32_t K = t.header.top_k;
    std::size_t drafts = 0, verifies = 0;
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
        const trace::TraceStep& step = t.steps[s];
        INFO("step " << s);
        if (step.tokens.front().phase == Phase::draft_verify) {
            ++verifies;
            // Proposed by the block just before it, whose anchor it runs first, at its position.
            REQUIRE(s > 0);
            REQUIRE(t.steps[s - 1].draft());
            CHECK(step.tokens[0].token == t.steps[s - 1].tokens[0].token);
            CHECK(step.tokens[0].position == t.steps[s - 1].tokens[0].position);
        }
        if (!step.draft()) {
            REQUIRE(step.layers.size() == L);
            continue;
        }
        ++drafts;
        REQUIRE(step.layers == std::vector<std::uint16_t>{std::uint16_t(L), std::uint16_t(L + 1), std::uint16_t(L + 2)});
        REQUIRE(step.n() == g);
        const std::uint32_t p = step.tokens[0].position;
        REQUIRE(p < all.size());
        CHECK(step.tokens[0].token == std::uint32_t(all[p]));  // the anchor: the trunk's next token
        for (std::size_t i = 0; i < g; ++i) {
            CHECK(step.tokens[i].position == p + i);
            if (i > 0) CHECK(step.tokens[i].token == std::uint32_t(c.dspark.noise_token_id));
        }
        // The stages' routers by hand: rings afresh over the trunk's tokens before the anchor.
        DecodeState trunk = model->new_state();
        std::vector<float> taps;
        trunk.taps = &taps;
        model->forward(trunk, std::span<const std::int32_t>(all).first(p), false);
        DsparkState st = model->new_dspark_state();
        model->dspark_extend(st, taps);
        Collect want;
        st.routes = &want;
        model->dspark_block(st, all[p]);
        REQUIRE(want.layers.size() == 3);
        for (std::size_t b = 0; b < 3; ++b)
            for (std::size_t i = 0; i < g; ++i) {
                const auto got = step.selection(b, i, K);
                for (std::size_t j = 0; j < K; ++j) {
                    CHECK(int(got[j]) == want.experts[b][i * K + j]);
                    CHECK(step.weights[(b * g + i) * K + j] == want.weights[b][i * K + j]);
                }
            }
    }
    CHECK(verifies == stats.verify_calls);
    CHECK(drafts == verifies);
}
