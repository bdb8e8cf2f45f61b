// The real-geometry synthetic container (libaff/quant/geometry_container.hpp): the config
// is V4-Flash's layer order, a small file (one layer, 6 experts, 512 rows of vocabulary,
// every matrix at its real shape) holds each tensor in the official storage and each
// expert as aff-quantize lays it out (the MTP layer's too), Model::load runs it to finite
// logits of moderate size (and its MTP layer to finite draft logits), and the bytes do not
// depend on the thread count. With dspark, the draft container beside it loads with it
// (load_model_with_draft) into three DSpark stages whose block gives finite logits.
#include "libaff/quant/geometry_container.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/model/draft_load.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/quant/codebook_source.hpp"
#include "libaff/quant/matrix.hpp"

#include "../temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <vector>

namespace {

std::vector<char> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("the V4-Flash config has the real layer order", "[quant]") {
    const aff::ModelConfig c = aff::parse_model_config(aff::quant::deepseek_v4_flash_config(), "config");
    REQUIRE(c.num_layers == 43);
    REQUIRE(c.hidden_size == 4096);
    REQUIRE(c.vocab_size == 129280);
    int sliding = 0, csa = 0, hca = 0, hash = 0;
    for (int i = 0; i < c.num_layers; ++i) {
        sliding += c.attention[i] == aff::AttentionKind::sliding;
        csa += c.attention[i] == aff::AttentionKind::csa;
        hca += c.attention[i] == aff::AttentionKind::hca;
        hash += c.hash_routed[i];
    }
    CHECK(sliding == 2);
    CHECK(csa == 21);
    CHECK(hca == 20);
    CHECK(hash == 3);
    CHECK(c.attention[2] == aff::AttentionKind::csa);
    CHECK(c.attention[3] == aff::AttentionKind::hca);
    CHECK(c.compress_ratio[3] == 128);
    CHECK(c.rope_compress.yarn);
}

TEST_CASE("a one-layer geometry container loads and runs", "[quant]") {
    aff::test::TempDir dir;
    aff::quant::GeometryContainerOptions o;
    o.out_path = dir / "g.aff";
    o.layers = 1;
    o.experts = 6;
    o.vocab = 512;
    o.seed = 7;
    o.mtp = true;
    aff::ThreadPool pool2(2);
    const auto report = aff::quant::write_geometry_container(o, pool2, aff::null_progress());
    CHECK(report.experts == 12);  // the layer's and the MTP layer's
    CHECK(report.expert_bytes == 12 * (2 * aff::quant::matrix_bytes(2048, 4096) + aff::quant::matrix_bytes(4096, 2048)));

    {
        const aff::Container c = aff::Container::open(o.out_path);
        REQUIRE(c.config());
        CHECK((*c.config())["num_hidden_layers"] == 1);
        CHECK((*c.config())["n_routed_experts"] == 6);
        CHECK((*c.config())["compress_ratios"].size() == 2);  // layer 0 and the MTP entry
        CHECK(c.codebook_id() == aff::quant::builtin_codebook_source().id);
        const aff::TensorInfo& wq_b = c.tensor("layers.0.attn.wq_b.weight");
        CHECK(wq_b.type == aff::StorageType::F8_E4M3);
        CHECK(wq_b.shape == std::vector<std::uint64_t>{32768, 1024});
        const aff::TensorInfo& scale = c.tensor("layers.0.attn.wq_b.scale");
        CHECK(scale.type == aff::StorageType::F8_E8M0);
        CHECK(scale.shape == std::vector<std::uint64_t>{256, 8});
        CHECK(c.tensor("layers.0.ffn.gate.tid2eid").type == aff::StorageType::I64);
        CHECK(c.tensor("layers.0.hc_attn_fn").type == aff::StorageType::F32);
        CHECK(c.tensor("embed.weight").shape == std::vector<std::uint64_t>{512, 4096});
        REQUIRE(c.experts().size() == 12);
        CHECK(c.tensor("mtp.0.e_proj.weight").type == aff::StorageType::F8_E4M3);
        CHECK(c.tensor("mtp.0.ffn.experts.5.w1.weight").type == aff::StorageType::TQ2875);
        CHECK(c.tensor("mtp.0.attn.wkv.weight").shape == std::vector<std::uint64_t>{512, 4096});
        const aff::TensorInfo& w2 = c.tensor("layers.0.ffn.experts.5.w2.weight");
        CHECK(w2.type == aff::StorageType::TQ2875);
        CHECK(w2.shape == std::vector<std::uint64_t>{4096, 2048});
    }

    auto model = aff::Model::load(o.out_path, pool2);
    aff::DecodeState st = model->new_state();
    const std::vector<std::int32_t> tokens{3, 141};
    std::vector<float> streams;
    const std::vector<float> logits = model->forward(st, tokens, false, &streams);
    REQUIRE(logits.size() == 512);
    REQUIRE(model->has_mtp());
    const std::vector<float> draft = model->mtp_forward(st, streams, tokens, false);
    REQUIRE(draft.size() == 512);
    for (float v : draft) REQUIRE(std::isfinite(v));
    double sum = 0, sq = 0;
    for (float v : logits) {
        REQUIRE(std::isfinite(v));
        sum += v, sq += double(v) * v;
    }
    const double sd = std::sqrt(sq / 512 - (sum / 512) * (sum / 512));
    CHECK(sd > 0.05);  // the head sees O(1) activations: neither vanished ...
    CHECK(sd < 20.0);  // ... nor blown up
    model.reset();

    aff::ThreadPool pool1(1);
    o.out_path = dir / "g1.aff";
    aff::quant::write_geometry_container(o, pool1, aff::null_progress());
    CHECK(file_bytes(dir / "g.aff") == file_bytes(dir / "g1.aff"));
}

TEST_CASE("a geometry container with DSpark stages loads with its draft container", "[quant]") {
    aff::test::TempDir dir;
    aff::quant::GeometryContainerOptions o;
    o.out_path = dir / "g.aff";
    o.layers = 1;
    o.experts = 6;
    o.vocab = 512;
    o.dspark = true;
    aff::ThreadPool pool(2);
    const auto report = aff::quant::write_geometry_container(o, pool, aff::null_progress());
    CHECK(report.draft_path == dir / "g.dspark.aff");
    CHECK(aff::default_draft_path(o.out_path) == report.draft_path);
    CHECK(report.experts == 4 * 6);  // the layer's and the three stages'
    {
        const aff::Container d = aff::Container::open(report.draft_path);
        CHECK(d.metadata().at("role") == "draft");
        CHECK((*d.config())["compress_ratios"].size() == 4);  // layer 0 and the three stages (0731: 43 + 3)
        CHECK(d.codebook_id() == aff::quant::builtin_codebook_source().id);
        CHECK(d.experts().size() == 18);
        CHECK(d.tensor("mtp.0.main_proj.weight").shape == std::vector<std::uint64_t>{4096, 4096});  // one tap layer
        CHECK(d.tensor("mtp.2.ffn.experts.5.w1.weight").type == aff::StorageType::TQ2875);
        CHECK(d.tensor("mtp.2.markov_head.markov_w1.weight").shape == std::vector<std::uint64_t>{512, 256});
        CHECK(d.tensor("mtp.2.confidence_head.proj.weight").shape == std::vector<std::uint64_t>{1, 4096 + 256});
        CHECK(!d.find("mtp.1.markov_head.markov_w1.weight"));
        CHECK(!d.find("embed.weight"));
    }
    auto model = aff::load_model_with_draft(o.out_path, report.draft_path, pool);
    REQUIRE(model->has_dspark());
    CHECK(model->weights().dspark.stages.size() == 3);
    const aff::ModelConfig& c = model->config();
    CHECK(c.dspark.block_size == 5);
    CHECK(c.dspark.tap_layers == std::vector<int>{0});
    CHECK(c.dspark.noise_token_id == 511);
    aff::DecodeState st = model->new_state();
    std::vector<float> taps;
    st.taps = &taps;
    model->forward(st, std::vector<std::int32_t>{3, 141}, false);
    REQUIRE(taps.size() == 2 * 4096);
    aff::DsparkState ds = model->new_dspark_state();
    model->dspark_extend(ds, taps);
    const aff::DsparkBlock b = model->dspark_block(ds, 7);
    REQUIRE(b.logits.size() == 5 * 512);
    for (float v : b.logits) REQUIRE(std::isfinite(v));
}

TEST_CASE("geometry container options out of range are usage errors", "[quant]") {
    aff::test::TempDir dir;
    aff::ThreadPool pool(1);
    aff::quant::GeometryContainerOptions o;
    o.out_path = dir / "x.aff";
    o.layers = 44;
    CHECK_THROWS_WITH(aff::quant::write_geometry_container(o, pool, aff::null_progress()),
                      Catch::Contains("--layers 44 is out of range"));
    o.layers = 1;
    o.experts = 5;
    CHECK_THROWS_WITH(aff::quant::write_geometry_container(o, pool, aff::null_progress()),
                      Catch::Contains("--experts 5 is out of range"));
    CHECK(dir.entries() == 0);
}

// The routing skew (GeometryContainerOptions::zipf_s): a learned layer's bias is
// scale · ln(E · P(rank)), P the Zipf-with-floor popularity, so exp(bias / scale) / E is a
// distribution whose sorted values follow (r + 1)^-s above the floor, s within the spread.
TEST_CASE("the routing skew's router bias has the Zipf-with-floor shape", "[quant]") {
    aff::quant::GeometryContainerOptions o;
    o.zipf_s = 1.6;
    o.zipf_s_spread = 0.2;
    o.floor = 0.15;
    const std::uint64_t E = 256;
    for (int layer : {3, 4, 42}) {
        const std::vector<float> b = aff::quant::skewed_router_bias(o, layer, E);
        REQUIRE(b.size() == E);
        std::vector<double> p;
        double sum = 0;
        for (float v : b) sum += p.emplace_back(std::exp(double(v) / o.skew_scale) / double(E));
        CHECK(sum == Approx(1.0).epsilon(1e-4));
        std::sort(p.begin(), p.end(), std::greater<double>());
        const double f = o.floor / double(E);
        const double s = -std::log2((p[1] - f) / (p[0] - f));  // from ranks 0 and 1
        CHECK(s >= 1.4 - 1e-3);
        CHECK(s <= 1.8 + 1e-3);
        CHECK((p[9] - f) / (p[0] - f) == Approx(std::pow(10.0, -s)).epsilon(1e-3));  // rank 9 on the same curve
        CHECK(p[E - 1] > f);  // every expert keeps at least the floor
    }
    // Each layer its own ranking: the busiest expert differs somewhere among three layers.
    auto busiest = [&](int layer) {
        const std::vector<float> b = aff::quant::skewed_router_bias(o, layer, E);
        return std::max_element(b.begin(), b.end()) - b.begin();
    };
    CHECK((busiest(3) != busiest(4) || busiest(4) != busiest(5)));
    // Deterministic in the seed.
    CHECK(aff::quant::skewed_router_bias(o, 3, E) == aff::quant::skewed_router_bias(o, 3, E));
}

TEST_CASE("a routing skew out of range is a usage error", "[quant]") {
    aff::test::TempDir dir;
    aff::ThreadPool pool(1);
    aff::quant::GeometryContainerOptions o;
    o.out_path = dir / "x.aff";
    o.layers = 1;
    o.zipf_s = -1;
    CHECK_THROWS_WITH(aff::quant::write_geometry_container(o, pool, aff::null_progress()), Catch::Contains("routing skew"));
    o.zipf_s = 1.6;
    o.zipf_s_spread = 2;
    CHECK_THROWS_WITH(aff::quant::write_geometry_container(o, pool, aff::null_progress()), Catch::Contains("routing skew"));
    o.zipf_s_spread = 0.2;
    o.floor = 1.5;
    CHECK_THROWS_WITH(aff::quant::write_geometry_container(o, pool, aff::null_progress()), Catch::Contains("routing skew"));
    CHECK(dir.entries() == 0);
}
