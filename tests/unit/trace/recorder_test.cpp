// Tests for libaff/trace/recorder and the router hook of libaff/model/forward: on the
// fixture models, a recorded run's logits are bit-identical to an unrecorded one, and the
// trace read back holds exactly what the forward routed — every step's tokens, positions
// and phases, hash layers' experts equal to the tid2eid rows of the input tokens, the
// learned layers' ids and weights equal to what the router handed the observer, and
// normalised gates summing to the routed scaling factor.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/runtime/open_sequence.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/trace/recorder.hpp"
#include "libaff/trace/route_trace.hpp"

#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

using namespace aff;
using namespace aff::trace;

namespace {

const std::string models = std::string(AFF_TEST_DATA) + "/models";

// Every event as the router produced it.
struct Capture final : RouteObserver {
    std::vector<std::vector<int>> experts;
    std::vector<std::vector<float>> weights;
    int ends = 0;
    void on_route(const RouteEvent& e) override {
        experts.emplace_back(e.experts.begin(), e.experts.end());
        weights.emplace_back(e.weights.begin(), e.weights.end());
    }
    void on_forward_end() override { ++ends; }
};

// A prefill of 4 tokens, then two decode steps; every logit of every call.
std::vector<float> run(const Model& m, RouteObserver* observer, RouteRecorder* recorder) {
    DecodeState st = m.new_state();
    st.routes = observer;
    const std::vector<std::int32_t> prompt = {1, 17, 42, 200};
    std::vector<float> all;
    if (recorder) recorder->begin(0, Phase::prefill);
    auto l = m.forward(st, prompt, true);
    all.insert(all.end(), l.begin(), l.end());
    for (std::int32_t t : {7, 99}) {
        if (recorder) recorder->begin(0, Phase::decode);
        const std::int32_t one[1] = {t};
        l = m.forward(st, one, true);
        all.insert(all.end(), l.begin(), l.end());
    }
    return all;
}

}  // namespace

TEST_CASE("recording routes changes no logit and records what the forward routed", "[trace]") {
    ThreadPool pool(2);
    test::TempDir dir;
    for (const char* name : {"tiny-a", "tiny-b", "tiny-c"}) {
        INFO(name);
        const std::string path = models + "/" + name;
        auto model = Model::load(path, pool);
        const ModelConfig& c = model->config();
        const std::vector<float> plain = run(*model, nullptr, nullptr);

        RouteRecorder recorder(dir / "r.aft", trace_header_for(c, path));
        const std::vector<float> recorded = run(*model, &recorder, &recorder);
        REQUIRE(plain.size() == recorded.size());
        REQUIRE(std::memcmp(plain.data(), recorded.data(), plain.size() * sizeof(float)) == 0);
        recorder.publish();

        Capture capture;
        run(*model, &capture, nullptr);
        REQUIRE(capture.ends == 3);

        const RouteTrace t = read_route_trace(dir / "r.aft");
        REQUIRE(t.header.layers == std::uint32_t(c.num_layers));
        REQUIRE(t.header.experts == std::uint32_t(c.n_routed_experts));
        REQUIRE(t.header.top_k == std::uint32_t(c.experts_per_token));
        REQUIRE(t.header.identity_kind == IdentityKind::checkpoint);
        REQUIRE(t.steps.size() == 3);
        const std::vector<std::vector<std::uint32_t>> tokens = {{1, 17, 42, 200}, {7}, {99}};
        const std::uint32_t K = t.header.top_k;
        std::size_t event = 0;
        for (std::size_t s = 0; s < 3; ++s) {
            const TraceStep& st = t.steps[s];
            REQUIRE(st.n() == tokens[s].size());
            for (std::size_t i = 0; i < st.n(); ++i) {
                REQUIRE(st.tokens[i].token == tokens[s][i]);
                REQUIRE(st.tokens[i].position == (s == 0 ? i : 3 + s));
                REQUIRE(st.tokens[i].phase == (s == 0 ? Phase::prefill : Phase::decode));
            }
            REQUIRE(st.layers.size() == std::size_t(c.num_layers));
            for (std::size_t b = 0; b < st.layers.size(); ++b, ++event) {
                REQUIRE(st.layers[b] == b);
                const auto& w = model->weights().layers[b].ffn;
                for (std::size_t i = 0; i < st.n(); ++i) {
                    const auto sel = st.selection(b, i, K);
                    float sum = 0;
                    for (std::uint32_t j = 0; j < K; ++j) {
                        REQUIRE(sel[j] == capture.experts[event][i * K + j]);
                        const float wt = st.weights[(b * st.n() + i) * K + j];
                        REQUIRE(std::memcmp(&wt, &capture.weights[event][i * K + j], 4) == 0);
                        sum += wt;
                        if (c.hash_routed[b]) REQUIRE(sel[j] == w.tid2eid[std::size_t(tokens[s][i]) * K + j]);
                    }
                    if (c.norm_topk_prob) REQUIRE(sum == Approx(c.routed_scaling_factor).epsilon(1e-5));
                }
            }
        }
    }
}

TEST_CASE("the CPU backend keeps its route observer across reset", "[trace]") {
    ThreadPool pool(2);
    auto model = Model::load(models + "/tiny-a", pool);
    auto backend = open_sequence(*model, models + "/tiny-a", BackendOptions{0, 0}, ForwardOptions{});
    Capture capture;
    backend->set_route_observer(&capture);
    const std::int32_t tokens[2] = {3, 4};
    backend->forward(tokens, false);
    backend->reset();
    backend->forward(tokens, false);
    REQUIRE(capture.ends == 2);
    REQUIRE(capture.experts.size() == 2 * std::size_t(model->config().num_layers));
}

TEST_CASE("a call over several sequences records each as its own step under its own id", "[trace]") {
    ThreadPool pool(2);
    test::TempDir dir;
    const std::string path = models + "/tiny-a";
    auto model = Model::load(path, pool);
    const ModelConfig& c = model->config();
    const int K = c.experts_per_token;
    RouteRecorder recorder(dir / "batch.aft", trace_header_for(c, path));
    // A batched decode step of sequences 5, 9 and 2 at positions 40, 7 and 0, reported as one
    // forward each (GpuModel::decode), then a fourth forward: still the last sequence's.
    const std::uint32_t ids[3] = {5, 9, 2};
    const std::int64_t starts[4] = {40, 7, 0, 1};
    const std::int32_t tokens[4] = {11, 12, 13, 14};
    recorder.begin(ids, Phase::decode);
    for (int call = 0; call < 4; ++call) {
        std::vector<int> experts(K);
        std::vector<float> weights(K);
        for (int j = 0; j < K; ++j) {
            experts[j] = (call + j) % c.n_routed_experts;
            weights[j] = 0.25f * float(call * K + j);
        }
        for (int l = 0; l < c.num_layers; ++l)
            recorder.on_route(RouteEvent{l, starts[call], std::span<const std::int32_t>(&tokens[call], 1), K, experts, weights});
        recorder.on_forward_end();
    }
    recorder.begin(7, Phase::prefill);
    const std::int32_t two[2] = {1, 2};
    const std::vector<int> experts(std::size_t(2) * K, 1);
    const std::vector<float> weights(experts.size(), 0.5f);
    recorder.on_route(RouteEvent{0, 3, two, K, experts, weights});
    recorder.on_forward_end();
    recorder.publish();
    const RouteTrace t = read_route_trace(dir / "batch.aft");
    REQUIRE(t.steps.size() == 5);
    const std::uint32_t want_sequence[5] = {5, 9, 2, 2, 7};
    for (int s = 0; s < 4; ++s) {
        INFO(s);
        REQUIRE(t.steps[s].n() == 1);
        REQUIRE(t.steps[s].tokens[0].sequence == want_sequence[s]);
        REQUIRE(t.steps[s].tokens[0].position == std::uint32_t(starts[s]));
        REQUIRE(t.steps[s].tokens[0].token == std::uint32_t(tokens[s]));
        REQUIRE(t.steps[s].tokens[0].phase == Phase::decode);
        REQUIRE(t.steps[s].layers.size() == std::size_t(c.num_layers));
        REQUIRE(t.steps[s].selection(1, 0, K)[0] == s % c.n_routed_experts);
    }
    REQUIRE(t.steps[4].n() == 2);
    REQUIRE(t.steps[4].tokens[1].sequence == 7);
    REQUIRE(t.steps[4].tokens[1].position == 4);
    REQUIRE(t.steps[4].tokens[1].phase == Phase::prefill);
    REQUIRE_THROWS_AS(recorder.begin(std::span<const std::uint32_t>(), Phase::decode), Error);
}
