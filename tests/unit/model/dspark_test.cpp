// Tests for the DSpark drafter's forward (model doc §5.2; libaff/model/dspark_forward.cpp) on a
// random checkpoint with mtp.0..2 DSpark stages (tests/common/random_dspark_checkpoint.hpp).
// No DSpark reference code is public (tests/oracle/dspark_reference.md), so these check what
// must hold by construction: detection and loading, the taps as the streams' mean, the block
// attention's key set (ring positions plus the whole block, order-free, no causal mask), rings
// independent of how positions are fed, a block that leaves the rings alone, and the Markov
// and confidence heads against their formulas.
#include "libaff/checkpoint/tensor_names.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/attention_ops.hpp"
#include "libaff/model/forward.hpp"

#include "common/random_dspark_checkpoint.hpp"
#include "unit/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace {

// One checkpoint for the whole test process (writing it takes a moment).
const std::string& dspark_checkpoint() {
    static aff::test::TempDir dir;
    static const std::string path = [] {
        const std::string p = dir / "dspark";
        aff::test::write_random_dspark_checkpoint(p, 7);
        return p;
    }();
    return path;
}

std::vector<std::int32_t> prompt(int n, int salt) {
    std::vector<std::int32_t> t{0};
    for (int i = 1; i < n; ++i) t.push_back(2 + (i * 37 + i * i * 11 + salt * 101) % 1000);
    return t;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
    return d;
}

}  // namespace

TEST_CASE("a checkpoint with mtp.0.main_proj loads as DSpark: stages counted, config read", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(dspark_checkpoint(), pool);
    const aff::ModelConfig& c = model->config();
    CHECK(model->has_dspark());
    CHECK_FALSE(model->has_mtp());  // num_nextn_predict_layers is 1, as in -0731, but no e_proj
    CHECK(c.dspark.keys);
    CHECK(c.dspark.block_size == 5);
    CHECK(c.dspark.noise_token_id == 1023);
    CHECK(c.dspark.markov_rank == 16);
    CHECK(c.dspark.tap_layers == std::vector<int>{3, 4, 5});
    const aff::DsparkWeights& w = model->weights().dspark;
    CHECK(w.stages.size() == 3);
    CHECK(w.main_proj.rows == 256);
    CHECK(w.main_proj.cols == 3 * 256);
    CHECK(w.markov_w1.rows == 1024);
    CHECK(w.markov_w1.cols == 16);
    CHECK(w.confidence.cols == 256 + 16);
    CHECK_FALSE(w.stages[1].ffn.bias.empty());  // learned routing with its bias
    // transformers has no DSpark names: its own tensors keep the official ones, a stage's
    // layer tensors map as a trunk layer's.
    CHECK(aff::canonical_tensor_name("model.mtp.2.markov_head.markov_w1.weight").name ==
          "mtp.2.markov_head.markov_w1.weight");
    CHECK(aff::canonical_tensor_name("mtp.0.main_proj.weight").name == "mtp.0.main_proj.weight");
    CHECK(aff::canonical_tensor_name("model.mtp.1.self_attn.kv_proj.weight").name == "mtp.1.attn.wkv.weight");
    // The same defaults stand in for missing keys; a bad one is named.
    nlohmann::json j = aff::test::v4_config(aff::test::tiny_v4_geometry());
    const aff::ModelConfig plain = aff::parse_model_config(j, "config.json");
    CHECK_FALSE(plain.dspark.keys);
    CHECK(plain.dspark.tap_layers == std::vector<int>{3, 4, 5});
    CHECK(plain.dspark.block_size == 5);
    j["dspark_target_layer_ids"] = {4, 3};
    CHECK_THROWS_WITH(aff::parse_model_config(j, "config.json"),
                      "config.json: field dspark_target_layer_ids[1]: 3 does not follow 4 (taps are distinct layers in "
                      "increasing order)");
    j["dspark_target_layer_ids"] = {1, 6};
    CHECK_THROWS_WITH(aff::parse_model_config(j, "config.json"),
                      "config.json: field dspark_target_layer_ids[1]: 6 is out of range [0, 5]");
    j.erase("dspark_target_layer_ids");
    j["dspark_block_size"] = 5;
    j["vocab_size"] = 1024;
    CHECK_THROWS_WITH(aff::parse_model_config(j, "config.json"),
                      "config.json: field dspark_noise_token_id: missing, and the default 128799 is outside the "
                      "vocabulary of 1024");
}

TEST_CASE("DSpark taps are the mean of the streams after the tap layers, however tokens are split", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(dspark_checkpoint(), pool);
    const int hc = model->config().hc_mult, D = model->config().hidden_size, taps = 3;
    const auto tokens = prompt(23, 1);
    const int n = int(tokens.size());
    aff::DecodeState whole = model->new_state();
    std::vector<float> tap_rows, streams;
    whole.taps = &tap_rows;
    model->forward(whole, tokens, false, &streams);
    REQUIRE(tap_rows.size() == std::size_t(n) * taps * D);
    // Tap 2 is after layer 5, the last: the mean of the final streams.
    for (int t = 0; t < n; ++t)
        for (int d = 0; d < D; ++d) {
            float sum = 0;
            for (int k = 0; k < hc; ++k) sum += streams[(std::size_t(t) * hc + k) * D + d];
            REQUIRE(tap_rows[(std::size_t(t) * taps + 2) * D + d] == sum * (1.0f / float(hc)));
        }
    // Taps 0 and 1 are other layers' (not copies of the last).
    CHECK(max_abs_diff(std::vector<float>(tap_rows.begin(), tap_rows.begin() + D),
                       std::vector<float>(tap_rows.begin() + 2 * D, tap_rows.begin() + 3 * D)) > 1e-3);
    // Fed in chunks the taps are the same, bit for bit.
    aff::DecodeState chunked = model->new_state();
    std::vector<float> part, joined;
    chunked.taps = &part;
    int at = 0;
    for (int c : {7, 1, 15}) {
        model->forward(chunked, std::span(tokens).subspan(std::size_t(at), std::size_t(c)), false);
        joined.insert(joined.end(), part.begin(), part.end());
        at += c;
    }
    CHECK(joined == tap_rows);
}

TEST_CASE("attend_block: every block query sees the ring's positions and the whole block, in any order", "[model]") {
    aff::ThreadPool pool(1);
    // Dh 4, one head, window 4, ring holding positions 3..5 (ring_first 3), block of 3 at 6..8.
    const int Dh = 4, W = 4, n = 3;
    std::vector<float> ring(std::size_t(W) * Dh), kv(std::size_t(n) * Dh), q(std::size_t(n) * Dh);
    for (std::size_t i = 0; i < ring.size(); ++i) ring[i] = std::sin(0.7f * float(i) + 0.3f);
    for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = std::cos(1.3f * float(i));
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = 0.5f * std::sin(2.1f * float(i) + 1.0f);
    const float sink[] = {0.25f};
    std::vector<float> o(std::size_t(n) * Dh);
    aff::attend_block(pool, {n, 1, Dh, W, 6}, q.data(), kv.data(), ring.data(), 3, sink, o.data());
    // By hand: keys ring[3 % 4], ring[4 % 4], ring[5 % 4], then kv[0..2].
    for (int t = 0; t < n; ++t) {
        std::vector<const float*> keys = {&ring[3 * Dh], &ring[0], &ring[1 * Dh], &kv[0], &kv[Dh], &kv[2 * Dh]};
        double den = std::exp(double(sink[0])), acc[4] = {0, 0, 0, 0};
        for (const float* k : keys) {
            double s = 0;
            for (int d = 0; d < Dh; ++d) s += double(q[std::size_t(t) * Dh + d]) * k[d];
            const double e = std::exp(s / 2.0);
            den += e;
            for (int d = 0; d < Dh; ++d) acc[d] += e * k[d];
        }
        for (int d = 0; d < Dh; ++d) CHECK(o[std::size_t(t) * Dh + d] == Approx(acc[d] / den).epsilon(1e-5));
    }
    // No causal mask: the first query depends on the last block key.
    std::vector<float> kv2 = kv, o2(o.size());
    kv2[2 * Dh] += 1.0f;
    aff::attend_block(pool, {n, 1, Dh, W, 6}, q.data(), kv2.data(), ring.data(), 3, sink, o2.data());
    CHECK(std::fabs(o2[0] - o[0]) > 1e-3);
    // The block's keys as a set: swapping two block rows changes no query's output (but rounding).
    std::vector<float> kv3 = kv;
    std::swap_ranges(kv3.begin(), kv3.begin() + Dh, kv3.begin() + 2 * Dh);
    std::vector<float> o3(o.size());
    aff::attend_block(pool, {n, 1, Dh, W, 6}, q.data(), kv3.data(), ring.data(), 3, sink, o3.data());
    CHECK(max_abs_diff(o3, o) < 1e-6);
    // The ring is read only from ring_first (and never before start - W).
    aff::attend_block(pool, {n, 1, Dh, W, 6}, q.data(), kv.data(), ring.data(), 5, sink, o2.data());
    CHECK(std::fabs(o2[0] - o[0]) > 1e-4);
}

TEST_CASE("DSpark rings do not depend on how positions are fed; a draft block leaves them as they were", "[model]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(dspark_checkpoint(), pool);
    const std::size_t row = 3 * std::size_t(model->config().hidden_size);
    const auto tokens = prompt(40, 2);  // longer than the window (16): the rings wrap
    aff::DecodeState trunk = model->new_state();
    std::vector<float> taps;
    trunk.taps = &taps;
    model->forward(trunk, tokens, false);

    aff::DsparkState whole = model->new_dspark_state();
    model->dspark_extend(whole, taps);
    CHECK(whole.position == 40);
    aff::DsparkState chunked = model->new_dspark_state();
    for (auto [at, c] : {std::pair{0, 9}, std::pair{9, 1}, std::pair{10, 30}})
        model->dspark_extend(chunked, std::span<const float>(taps).subspan(std::size_t(at) * row, std::size_t(c) * row));
    REQUIRE(chunked.stages.size() == 3);
    for (std::size_t s = 0; s < 3; ++s) CHECK(chunked.stages[s].ring == whole.stages[s].ring);  // bit for bit
    // Each stage's ring is its own (its own wkv and kv_norm).
    CHECK(whole.stages[0].ring != whole.stages[1].ring);

    // A block: γ rows of logits and pre-norm outputs; the rings and positions untouched.
    const aff::DsparkState before = whole;
    const aff::DsparkBlock b = model->dspark_block(whole, 77);
    CHECK(b.logits.size() == 5 * 1024);
    CHECK(b.y.size() == 5 * 256);
    for (std::size_t s = 0; s < 3; ++s) CHECK(whole.stages[s].ring == before.stages[s].ring);
    CHECK(whole.position == before.position);
    // Deterministic, and the anchor matters at every block position (the noise rows see it).
    const aff::DsparkBlock again = model->dspark_block(whole, 77);
    CHECK(again.logits == b.logits);
    const aff::DsparkBlock other = model->dspark_block(whole, 78);
    for (int i = 0; i < 5; ++i)
        CHECK(max_abs_diff(std::vector<float>(b.logits.begin() + i * 1024, b.logits.begin() + (i + 1) * 1024),
                           std::vector<float>(other.logits.begin() + i * 1024, other.logits.begin() + (i + 1) * 1024)) >
              1e-4);
    // The context matters: a state that saw other tokens drafts otherwise.
    aff::DsparkState shorter = model->new_dspark_state();
    model->dspark_extend(shorter, std::span<const float>(taps).first(39 * row));
    model->dspark_extend(shorter, std::span<const float>(taps).first(row));  // position 39 with position 0's taps
    CHECK(max_abs_diff(model->dspark_block(shorter, 77).logits, b.logits) > 1e-4);
}

TEST_CASE("the Markov and confidence heads follow their formulas", "[model]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(dspark_checkpoint(), pool);
    const aff::DsparkWeights& w = model->weights().dspark;
    const int V = 1024, r = 16, D = 256;
    std::vector<float> logits(V, 0.5f);
    model->dspark_markov(42, logits);
    for (int v : {0, 1, 500, 1023}) {
        double want = 0.5;
        for (int j = 0; j < r; ++j) want += double(w.markov_w2.row(v)[j]) * w.markov_w1.row(42)[j];
        CHECK(logits[std::size_t(v)] == Approx(want).epsilon(1e-5));
    }
    std::vector<float> y(D);
    for (int d = 0; d < D; ++d) y[std::size_t(d)] = std::sin(0.1f * float(d));
    double z = 0;
    for (int d = 0; d < D; ++d) z += double(w.confidence.row(0)[d]) * y[std::size_t(d)];
    for (int j = 0; j < r; ++j) z += double(w.confidence.row(0)[D + j]) * w.markov_w1.row(9)[j];
    const float c = model->dspark_confidence(y, 9);
    CHECK(c == Approx(1.0 / (1.0 + std::exp(-z))).epsilon(1e-5));
    CHECK(c > 0.0f);
    CHECK(c < 1.0f);
    CHECK(model->dspark_confidence(y, 10) != c);  // the previous token enters
}

TEST_CASE("a model without DSpark stages refuses DSpark calls", "[model]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/tiny-a-fp8", pool);
    CHECK_FALSE(model->has_dspark());
    aff::DsparkState st = model->new_dspark_state();
    CHECK_THROWS_WITH(model->dspark_block(st, 1), "the model has no DSpark stages");
}
