// DecodeState::predicted_routes (model/forward.hpp), the prefetch predictor's diagnostics: the
// logits are the same bit for bit with it on, every layer routed by its router (and no
// hash-routed one) reports one prediction per position before its own routing, and on the
// trained model the predictor names far more of a layer's experts than chance.
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/model/route_observer.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace {

const std::string kModels = std::string(AFF_TEST_DATA) + "/models";

class Sets final : public aff::RouteObserver {
public:
    void on_route(const aff::RouteEvent& e) override {
        order.push_back(e.layer);
        for (std::size_t t = 0; t < e.tokens.size(); ++t) {
            std::vector<int> s(e.experts.begin() + std::ptrdiff_t(t * std::size_t(e.top_k)),
                               e.experts.begin() + std::ptrdiff_t((t + 1) * std::size_t(e.top_k)));
            std::sort(s.begin(), s.end());
            at[{e.layer, e.start + std::int64_t(t)}] = s;
        }
    }
    void on_forward_end() override {}
    std::vector<int> order;
    std::map<std::pair<int, std::int64_t>, std::vector<int>> at;
};

}  // namespace

TEST_CASE("the pre-attention route predictor changes nothing and reports each router-routed layer", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(kModels + "/tiny-trained", pool);
    const aff::ModelConfig& c = model->config();
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 96; ++i) tokens.push_back(std::int32_t((i * 37 + 11) % c.vocab_size));
    aff::DecodeState plain = model->new_state(), watched = model->new_state();
    Sets actual, predicted;
    watched.routes = &actual;
    watched.predicted_routes = &predicted;
    const std::vector<float> a = model->forward(plain, tokens, true), b = model->forward(watched, tokens, true);
    CHECK(a == b);
    std::size_t routed_layers = 0, hits = 0, total = 0;
    for (int l = 0; l < c.num_layers; ++l) {
        const bool hash = c.hash_routed[std::size_t(l)];
        routed_layers += !hash;
        for (std::int64_t p = 0; p < std::int64_t(tokens.size()); ++p) {
            const auto it = predicted.at.find({l, p});
            CHECK((it != predicted.at.end()) == !hash);
            if (it == predicted.at.end()) continue;
            const std::vector<int>& want = actual.at.at({l, p});
            std::vector<int> both;
            std::set_intersection(it->second.begin(), it->second.end(), want.begin(), want.end(), std::back_inserter(both));
            hits += both.size();
            total += want.size();
        }
    }
    REQUIRE(routed_layers > 0);
    CHECK(predicted.order.size() == routed_layers);  // one call: one event a layer
    // Chance is k / E (a quarter here); the predictor does far better on the trained model.
    const double share = double(hits) / double(total);
    INFO("predictor share " << share);
    CHECK(share > 2.0 * c.experts_per_token / c.n_routed_experts);
}
