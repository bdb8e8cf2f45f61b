// Benchmark: the cost of recording route traces on the CPU path. Decodes the same tokens
// with and without a RouteRecorder on the model's forward, alternating runs, and prints
// the time per token of each and the overhead against the bound (2 % of decode
// time); then the recorder alone (its on_route and step writes, no forward) per token at
// V4-Flash's geometry (43 layers, top-6), which is what the real model would add.
//   route_trace_bench [MODEL_DIR] [DECODE_TOKENS] [ROUNDS]
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/trace/recorder.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double decode_seconds(const aff::Model& m, aff::RouteObserver* observer, aff::trace::RouteRecorder* rec, int n) {
    aff::DecodeState st = m.new_state();
    st.routes = observer;
    std::vector<std::int32_t> prompt(16);
    for (int i = 0; i < 16; ++i) prompt[i] = (i * 7 + 3) % m.config().vocab_size;
    if (rec) rec->begin(0, aff::trace::Phase::prefill);
    m.forward(st, prompt, false);
    const double t0 = now();
    for (int i = 0; i < n; ++i) {
        std::int32_t tok = (i * 13 + 5) % m.config().vocab_size;
        if (rec) rec->begin(0, aff::trace::Phase::decode);
        m.forward(st, std::span(&tok, 1), false);
    }
    return now() - t0;
}
}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "tests/data/models/tiny-a";
    const int n = argc > 2 ? std::stoi(argv[2]) : 200, rounds = argc > 3 ? std::stoi(argv[3]) : 5;
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(dir, pool);
    const std::string path = (std::filesystem::temp_directory_path() / "route_trace_bench.aft").string();
    std::vector<double> with, without;
    for (int r = 0; r < rounds; ++r) {
        without.push_back(decode_seconds(*model, nullptr, nullptr, n) / n);
        aff::trace::RouteRecorder rec(path, aff::trace::trace_header_for(model->config(), dir));
        with.push_back(decode_seconds(*model, &rec, &rec, n) / n);
        rec.publish();
    }
    std::sort(with.begin(), with.end());
    std::sort(without.begin(), without.end());
    const double a = without[rounds / 2], b = with[rounds / 2];
    std::printf("model %s, 1 thread, %d decode tokens x %d rounds (medians): %.1f us/token without, %.1f us/token with "
                "the recorder: overhead %.2f %% (bound 2 %%)\n", dir.c_str(), n, rounds, 1e6 * a, 1e6 * b, 100 * (b - a) / a);

    // The recorder alone at V4-Flash's geometry: 43 layer events of one token, top-6.
    aff::trace::TraceHeader h;
    h.layers = 43, h.experts = 256, h.top_k = 6, h.hash_layers.assign(43, false);
    aff::trace::RouteRecorder rec(path, h);
    std::vector<int> experts(6);
    std::vector<float> weights(6, 0.25f);
    std::vector<std::int32_t> token = {7};
    const int tokens = 20000;
    const double t0 = now();
    for (int t = 0; t < tokens; ++t) {
        rec.begin(0, aff::trace::Phase::decode);
        for (int l = 0; l < 43; ++l) {
            for (int j = 0; j < 6; ++j) experts[j] = (t * 31 + l * 7 + j * 41) % 256;
            rec.on_route(aff::RouteEvent{l, t, token, 6, experts, weights});
        }
        rec.on_forward_end();
    }
    const double per = (now() - t0) / tokens;
    const double t1 = now();
    rec.publish();
    const double pub = now() - t1;
    std::printf("recorder alone at 43 layers x top-6: %.2f us/token (%.3f %% of a 10 ms decode step); publish of %d "
                "tokens %.1f ms, %llu bytes\n", 1e6 * per, 100 * per / 0.010, tokens, 1e3 * pub,
                static_cast<unsigned long long>(std::filesystem::file_size(path)));
    std::filesystem::remove(path);
    return 0;
}
