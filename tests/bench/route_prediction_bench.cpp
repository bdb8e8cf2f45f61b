// How well a layer's routed experts can be known before its attention runs (issue 17: a tiered
// decode step could fetch a layer's pooled experts into VRAM during that layer's attention,
// when the bus is idle, instead of reading them over PCIe inside the MoE kernel after it). The
// predictor (DecodeState::predicted_routes): the layer's own router on its FFN collapse of the
// streams as they enter the layer, i.e. the routing as if attention added nothing. Measured on
// a trained model (the CPU reference; random weights route uniformly and would say nothing)
// over a text it runs in chunks: per layer routed by its router, the share of the k experts
// the predictor names that the router then chooses, against two baselines measured in the
// same run: the previous token's experts at the same layer (what a cache keeps), and chance
// (k / E). Hash-routed layers need no predictor: their experts follow from the token id.
//     route_prediction_bench MODEL TEXT [TOKENS]   (TOKENS of TEXT, default 4096, chunks of 256)
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/model/route_observer.hpp"
#include "libaff/runtime/model_tokenizer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace {

// Each layer's experts per position, as an observer saw them.
class Recorder final : public aff::RouteObserver {
public:
    void on_route(const aff::RouteEvent& e) override {
        auto& layer = chosen[e.layer];
        for (std::size_t t = 0; t < e.tokens.size(); ++t) {
            std::vector<int> set(e.experts.begin() + std::ptrdiff_t(t * std::size_t(e.top_k)),
                                 e.experts.begin() + std::ptrdiff_t((t + 1) * std::size_t(e.top_k)));
            std::sort(set.begin(), set.end());
            layer[e.start + std::int64_t(t)] = std::move(set);
        }
    }
    void on_forward_end() override {}
    std::map<int, std::map<std::int64_t, std::vector<int>>> chosen;
};

std::size_t overlap(const std::vector<int>& a, const std::vector<int>& b) {
    std::vector<int> both;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    return both.size();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: route_prediction_bench MODEL TEXT [TOKENS]\n");
        return 2;
    }
    try {
        const std::size_t want = argc > 3 ? std::size_t(std::max(64, std::atoi(argv[3]))) : 4096;
        aff::ThreadPool pool(0);
        auto model = aff::Model::load(argv[1], pool);
        const aff::ModelConfig& c = model->config();
        auto tok = aff::load_model_tokenizer(argv[1]);
        if (!tok) throw std::runtime_error("the model has no tokenizer");
        std::ifstream in(argv[2], std::ios::binary);
        if (!in) throw std::runtime_error(std::string(argv[2]) + ": cannot open");
        std::stringstream text;
        text << in.rdbuf();
        std::vector<std::int32_t> ids;
        for (auto id : tok->encode(text.str())) ids.push_back(std::int32_t(id));
        if (ids.size() > want) ids.resize(want);
        if (ids.size() < 64) throw std::runtime_error("the text gives fewer than 64 tokens");
        aff::DecodeState st = model->new_state();
        Recorder actual, predicted;
        st.routes = &actual;
        st.predicted_routes = &predicted;
        for (std::size_t at = 0; at < ids.size(); at += 256) {
            const std::size_t n = std::min<std::size_t>(256, ids.size() - at);
            model->forward(st, std::span<const std::int32_t>(ids).subspan(at, n), false);
        }
        const int k = c.experts_per_token, E = c.n_routed_experts;
        std::printf("%s: %d layers (%d hash-routed), %d experts, top %d; %zu tokens of %s\n", argv[1], c.num_layers,
                    int(std::count(c.hash_routed.begin(), c.hash_routed.end(), true)), E, k, ids.size(), argv[2]);
        std::printf("%-6s %22s %26s %10s\n", "layer", "predictor (pre-attn)", "previous token's experts", "chance");
        double sum_pred = 0, sum_prev = 0;
        int layers = 0;
        for (const auto& [layer, by_pos] : actual.chosen) {
            if (layer >= c.num_layers || c.hash_routed[std::size_t(layer)]) continue;
            const auto& pred = predicted.chosen[layer];
            std::size_t hits = 0, prev_hits = 0, n = 0;
            const std::vector<int>* last = nullptr;
            for (const auto& [pos, set] : by_pos) {
                const auto it = pred.find(pos);
                if (it == pred.end()) throw std::runtime_error("no prediction for a position");
                hits += overlap(it->second, set);
                if (last) prev_hits += overlap(*last, set);
                last = &set;
                ++n;
            }
            const double p = double(hits) / double(n * std::size_t(k)), q = double(prev_hits) / double((n - 1) * std::size_t(k));
            std::printf("%-6d %21.1f%% %25.1f%% %9.1f%%\n", layer, 100 * p, 100 * q, 100.0 * k / E);
            sum_pred += p;
            sum_prev += q;
            ++layers;
        }
        if (layers == 0) throw std::runtime_error("no layer routed by its router");
        std::printf("\nfigure: the pre-attention predictor names %.1f %% of a layer's experts (mean of %d layers)\n",
                    100 * sum_pred / layers, layers);
        std::printf("peer: the previous token's experts %.1f %%; chance %.1f %%\n", 100 * sum_prev / layers, 100.0 * k / E);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "route_prediction_bench: %s\n", e.what());
        return 1;
    }
}
