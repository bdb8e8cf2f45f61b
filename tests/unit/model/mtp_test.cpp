// Tests for the MTP draft layer (model doc §5.1). transformers drops mtp.* weights, so
// there is no oracle: these tests check what must hold by construction. The draft for
// position p+2 uses the trunk streams of position p and token p+1; fed in one chunk, in
// odd chunks or step by step beside decode, it gives the same logits; it depends on
// both inputs; a checkpoint without MTP says so. Its routing reaches a route observer as one
// call of layer L at the MTP positions (a route trace's draft step: the GPU's MTP layer is held
// to these events in tests/gpu/mtp_routes_test.cpp), and its router's margins go by MTP position.
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/model/route_observer.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double m = 0, d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        m = std::max(m, double(std::fabs(b[i])));
        d = std::max(d, double(std::fabs(a[i] - b[i])));
    }
    return d / m;
}

std::vector<std::int32_t> prompt(int n) {
    std::vector<std::int32_t> t{0};
    for (int i = 1; i < n; ++i) t.push_back(2 + (i * 37 + i * i * 11) % 250);
    return t;
}
}  // namespace

TEST_CASE("MTP drafts agree fed whole, in chunks, and step by step beside decode", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a-fp8", pool);
    REQUIRE(model->has_mtp());
    const int hc = model->config().hc_mult, D = model->config().hidden_size;
    const std::size_t per = std::size_t(hc) * D;
    const auto tokens = prompt(60);
    const int S = int(tokens.size()), V = model->config().vocab_size;

    // Whole: one prefill, then MTP over positions 0..S-2 with the tokens that follow.
    aff::DecodeState whole = model->new_state();
    std::vector<float> streams;
    model->forward(whole, tokens, false, &streams);
    const std::vector<float> all =
        model->mtp_forward(whole, std::span(streams).first((S - 1) * per), std::span(tokens).subspan(1));
    REQUIRE(all.size() == std::size_t(S - 1) * V);

    // Odd chunks of the MTP input.
    aff::DecodeState chunked = model->new_state();
    std::vector<float> parts;
    int at = 0;
    for (int c : {5, 17, 1, 36}) {
        auto p = model->mtp_forward(chunked, std::span(streams).subspan(at * per, c * per),
                                    std::span(tokens).subspan(at + 1, c));
        parts.insert(parts.end(), p.begin(), p.end());
        at += c;
    }
    REQUIRE(at == S - 1);
    CHECK(max_rel_diff(parts, all) < 1e-4);

    // Step by step: decode one token, draft from its streams once the next token is known.
    aff::DecodeState step = model->new_state();
    std::vector<float> stepped;
    for (int p = 0; p + 1 < S; ++p) {
        std::vector<float> s;
        model->forward(step, std::span(&tokens[p], 1), false, &s);
        auto d = model->mtp_forward(step, s, std::span(&tokens[p + 1], 1));
        stepped.insert(stepped.end(), d.begin(), d.end());
    }
    CHECK(max_rel_diff(stepped, all) < 1e-4);
}

TEST_CASE("an MTP draft depends on the trunk streams and on the next token", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a-fp8", pool);
    const auto tokens = prompt(20);
    aff::DecodeState st = model->new_state();
    std::vector<float> streams;
    model->forward(st, tokens, false, &streams);
    const std::size_t per = std::size_t(model->config().hc_mult) * model->config().hidden_size;
    std::vector<float> last(streams.end() - per, streams.end());
    auto draft = [&](const std::vector<float>& h, std::int32_t next) {
        aff::DecodeState s = model->new_state();
        return model->mtp_forward(s, h, std::span(&next, 1));
    };
    const auto base = draft(last, 7);
    CHECK(max_rel_diff(draft(last, 7), base) == 0.0);  // deterministic
    CHECK(max_rel_diff(draft(last, 8), base) > 1e-3);
    std::vector<float> other = last;
    for (float& v : other) v *= -1.0f;
    CHECK(max_rel_diff(draft(other, 7), base) > 1e-3);
    for (float v : base) REQUIRE(std::isfinite(v));
}

TEST_CASE("a checkpoint saved by transformers has no MTP layer, and drafting says so", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a", pool);
    CHECK(!model->has_mtp());
    aff::DecodeState st = model->new_state();
    std::vector<float> h(std::size_t(model->config().hc_mult) * model->config().hidden_size);
    std::int32_t next = 3;
    try {
        model->mtp_forward(st, h, std::span(&next, 1));
        FAIL("no error");
    } catch (const aff::Error& e) {
        CHECK(std::string(e.what()) == "the checkpoint has no MTP layer");
    }
}

namespace {
struct Calls final : aff::RouteObserver {
    struct Call {
        int layer = -1;
        std::int64_t start = 0;
        std::vector<std::int32_t> tokens;
        std::vector<int> ids;
        std::vector<float> weights;
    };
    std::vector<Call> calls;  // an end is a call of layer -1
    void on_route(const aff::RouteEvent& e) override {
        calls.push_back({e.layer, e.start, {e.tokens.begin(), e.tokens.end()}, {e.experts.begin(), e.experts.end()},
                         {e.weights.begin(), e.weights.end()}});
        REQUIRE(e.top_k == int(e.experts.size() / std::max<std::size_t>(1, e.tokens.size())));
    }
    void on_forward_end() override { calls.push_back({}); }
};
}  // namespace

TEST_CASE("mtp_forward reports its routing as one call of layer L at the MTP positions, and its margins there",
          "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(models + "/tiny-a-fp8", pool);
    const aff::ModelConfig& c = model->config();
    const int L = c.num_layers, K = c.experts_per_token, E = c.n_routed_experts;
    const auto tokens = prompt(10);
    const int n = int(tokens.size()) - 1;
    aff::DecodeState st = model->new_state();
    std::vector<float> streams;
    model->forward(st, tokens, true, &streams);  // no observer yet: the trunk's own events are forward_test's
    const std::size_t per = std::size_t(c.hc_mult) * c.hidden_size;
    Calls seen;
    aff::SelectionMargins margins;
    st.routes = &seen;
    st.margins = &margins;
    std::vector<float> out;
    model->mtp_forward(st, std::span(streams).first(std::size_t(n) * per), std::span(tokens).subspan(1), false, &out);
    const std::vector<float> h(out.end() - std::ptrdiff_t(per), out.end());
    const std::int32_t chained[1] = {5};
    model->mtp_forward(st, h, chained, false, &out);

    // Two calls, each one event of layer L and an end; starts 0 and n; the tokens run.
    REQUIRE(seen.calls.size() == 4);
    CHECK(seen.calls[1].layer == -1);
    CHECK(seen.calls[3].layer == -1);
    const Calls::Call& a = seen.calls[0];
    const Calls::Call& b = seen.calls[2];
    CHECK(a.layer == L);
    CHECK(b.layer == L);
    CHECK(a.start == 0);
    CHECK(b.start == n);
    CHECK(a.tokens == std::vector<std::int32_t>(tokens.begin() + 1, tokens.end()));
    CHECK(b.tokens == std::vector<std::int32_t>{5});
    for (const Calls::Call* call : {&a, &b}) {
        REQUIRE(call->ids.size() == call->tokens.size() * std::size_t(K));
        REQUIRE(call->weights.size() == call->ids.size());
        for (std::size_t t = 0; t < call->tokens.size(); ++t) {
            std::set<int> distinct;
            double sum = 0;
            for (int j = 0; j < K; ++j) {
                const int id = call->ids[t * K + j];
                CHECK((id >= 0 && id < E));
                distinct.insert(id);
                sum += call->weights[t * K + j];
            }
            CHECK(int(distinct.size()) == K);
            CHECK(sum == Approx(c.routed_scaling_factor).epsilon(1e-5));  // s / sum(s), times the scale
        }
    }
    // The MTP layer's router (learned, not hashed) noted a margin at each of its n + 1 positions.
    REQUIRE(margins.by_position.size() == std::size_t(n + 1));
    for (double m : margins.by_position) CHECK((std::isfinite(m) && m >= 0));
}
