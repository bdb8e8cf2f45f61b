// Tests for libaff/model/forward against the transformers oracle (tests/oracle/
// make_model_fixtures.py): for every fixture, logits at every position agree within
// max|Δ| ≤ 1e-3 · max|logit| with identical argmax, for whole-prompt prefill, chunked
// prefill with odd chunk sizes, and token-by-token decode.
#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {
const std::string models = std::string(AFF_TEST_DATA) + "/models";

struct Oracle {
    std::vector<std::int32_t> tokens;
    std::vector<float> logits;  // [S, V]
};

Oracle read_oracle(const std::string& dir) {
    aff::SafetensorsFile f(dir + "/oracle.safetensors");
    Oracle o;
    const aff::SafetensorsTensor* t = f.find("tokens");
    const aff::SafetensorsTensor* l = f.find("logits");
    REQUIRE(t);
    REQUIRE(l);
    for (std::uint64_t i = 0; i < t->elements(); ++i) {
        std::int64_t v;
        std::memcpy(&v, f.data(*t) + 8 * i, 8);
        o.tokens.push_back(static_cast<std::int32_t>(v));
    }
    o.logits.resize(l->elements());
    std::memcpy(o.logits.data(), f.data(*l), l->nbytes);
    return o;
}

// Max |Δ| over all positions relative to max |oracle logit|, and argmax agreement.
void check_logits(const std::vector<float>& got, const Oracle& o, int V, const std::string& what) {
    INFO(what);
    REQUIRE(got.size() == o.logits.size());
    double max_abs = 0, max_diff = 0;
    int argmax_mismatch = 0, worst = -1;
    const int S = int(o.tokens.size());
    for (int p = 0; p < S; ++p) {
        int ag = 0, ao = 0;
        for (int v = 0; v < V; ++v) {
            const std::size_t i = std::size_t(p) * V + v;
            max_abs = std::max(max_abs, double(std::fabs(o.logits[i])));
            const double d = std::fabs(double(got[i]) - o.logits[i]);
            if (d > max_diff) max_diff = d, worst = p;
            if (got[i] > got[std::size_t(p) * V + ag]) ag = v;
            if (o.logits[i] > o.logits[std::size_t(p) * V + ao]) ao = v;
        }
        argmax_mismatch += ag != ao;
    }
    INFO("max |delta| " << max_diff << " at position " << worst << ", max |logit| " << max_abs);
    CHECK(max_diff <= 1e-3 * max_abs);
    CHECK(argmax_mismatch == 0);
}

void check_fixture(const std::string& name, std::vector<int> chunks) {
    aff::ThreadPool pool(2);
    const std::string dir = models + "/" + name;
    auto model = aff::Model::load(dir, pool);
    const Oracle o = read_oracle(dir);
    const int V = model->config().vocab_size;
    SECTION("prefill of the whole prompt") {
        aff::DecodeState st = model->new_state();
        check_logits(model->forward(st, o.tokens, true), o, V, name + " prefill");
    }
    SECTION("chunked prefill") {
        aff::DecodeState st = model->new_state();
        std::vector<float> all;
        std::size_t at = 0;
        for (int c : chunks) {
            auto part = model->forward(st, std::span(o.tokens).subspan(at, c), true);
            all.insert(all.end(), part.begin(), part.end());
            at += c;
        }
        REQUIRE(at == o.tokens.size());
        check_logits(all, o, V, name + " chunked");
    }
    SECTION("token-by-token decode") {
        aff::DecodeState st = model->new_state();
        std::vector<float> all;
        for (std::int32_t t : o.tokens) {
            auto part = model->forward(st, std::span(&t, 1), false);
            all.insert(all.end(), part.begin(), part.end());
        }
        check_logits(all, o, V, name + " decode");
    }
}
}  // namespace

TEST_CASE("tiny-a (model doc §8 layout, transformers save) matches transformers", "[model]") {
    check_fixture("tiny-a", {23, 1, 5, 41, 30});
}

TEST_CASE("tiny-a in the official FP8/FP4 layout matches transformers on the dequantised weights", "[model]") {
    check_fixture("tiny-a-fp8", {3, 17, 9, 71});
}

TEST_CASE("tiny-b (CSA first, hc_mult 2, top-k above the entry count) matches transformers", "[model]") {
    check_fixture("tiny-b", {7, 61, 12});
}

TEST_CASE("tiny-c (HCA first, fused transformers names, 8 heads in 4 groups) matches transformers", "[model]") {
    check_fixture("tiny-c", {9, 33, 11, 7});
}
