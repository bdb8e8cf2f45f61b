// Tests for libaff/placement/tensor_split: the uneven rule, and for every layer of the fixtures'
// configs and of DeepSeek-V4-Flash's real config at 1, 2, 3, 4, 8 (and 16) ranks, that every
// split weight's shards cover its rows or columns exactly once, the attention's weights follow
// one group split, bytes per rank sum to the whole, the collectives (one per sub-layer), and
// the real model's bytes per rank in both expert forms against figures worked out by hand, and
// the N slabs the placement engine sees (dense bytes per rank, one expert's slot per rank, how
// many experts N slabs hold).
#include "libaff/checkpoint/config.hpp"
#include "libaff/core/error.hpp"
#include "libaff/placement/tensor_split.hpp"
#include "libaff/quant/geometry_container.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

using aff::ExpertSplit;
using aff::LayerTensorPlan;
using aff::Shard;
using aff::SplitKind;
using aff::WeightSplit;

namespace {

const std::string models = std::string(AFF_TEST_DATA) + "/models";

std::vector<std::pair<int, int>> pairs(const std::vector<Shard>& s) {
    std::vector<std::pair<int, int>> out;
    for (const Shard& x : s) out.emplace_back(x.first, x.count);
    return out;
}

const WeightSplit& weight(const LayerTensorPlan& p, const std::string& name) {
    for (const WeightSplit& w : p.weights)
        if (w.name == name) return w;
    FAIL("no weight " << name);
    throw 0;
}

// Every row (column split) or column (row split) of a split weight held by exactly one rank,
// shards in rank order with counts differing by at most one, bytes per rank summing to the whole.
void check_plan(const LayerTensorPlan& p, int ranks) {
    REQUIRE(int(p.rank_bytes.size()) == ranks);
    std::size_t sum = 0;
    for (std::size_t b : p.rank_bytes) sum += b;
    CHECK(sum == p.whole_bytes + std::size_t(ranks - 1) * p.replicated_bytes);
    for (const WeightSplit& w : p.weights) {
        INFO(w.name << " over " << ranks);
        REQUIRE(int(w.rank_bytes.size()) == ranks);
        std::size_t bytes = 0;
        for (std::size_t b : w.rank_bytes) bytes += b;
        if (w.kind == SplitKind::replicated) {
            for (std::size_t b : w.rank_bytes) CHECK(b == w.whole_bytes);
            continue;
        }
        CHECK(bytes == w.whole_bytes);
        if (w.kind == SplitKind::by_expert) continue;
        const std::size_t dim = w.kind == SplitKind::column ? w.rows : w.cols;
        REQUIRE(w.unit > 0);
        REQUIRE(dim % w.unit == 0);
        REQUIRE(int(w.shards.size()) == ranks);
        std::vector<int> hits(dim, 0);
        int next = 0;
        for (const Shard& s : w.shards) {
            CHECK(s.first == next);
            next = s.end();
            for (int u = s.first; u < s.end(); ++u)
                for (std::size_t i = 0; i < w.unit; ++i) ++hits.at(std::size_t(u) * w.unit + i);
        }
        CHECK(std::size_t(next) * w.unit == dim);
        CHECK(std::count(hits.begin(), hits.end(), 1) == std::ptrdiff_t(dim));
        for (std::size_t r = 1; r < w.shards.size(); ++r) {
            CHECK(w.shards[r].count <= w.shards[r - 1].count);
            CHECK(w.shards[0].count - w.shards[r].count <= 1);
        }
    }
}

std::vector<aff::ModelConfig> configs() {
    std::vector<aff::ModelConfig> out;
    for (const char* m : {"tiny-a", "tiny-b", "tiny-c", "tiny-trained"})
        out.push_back(aff::load_model_config(models + "/" + m + "/config.json"));
    out.push_back(aff::parse_model_config(aff::quant::deepseek_v4_flash_config(), "config"));
    return out;
}

std::string error_of(const aff::ModelConfig& c, const aff::TensorSplitOptions& o) {
    try {
        aff::plan_layer_split(c, 0, o);
    } catch (const aff::Error& e) {
        CHECK(e.kind() == aff::ErrorKind::usage);
        return e.message();
    }
    return "no error";
}

}  // namespace

TEST_CASE("the uneven rule gives the first ranks one more unit", "[placement]") {
    using P = std::vector<std::pair<int, int>>;
    CHECK(pairs(aff::split_units(6, 4)) == P{{0, 2}, {2, 2}, {4, 1}, {5, 1}});
    CHECK(pairs(aff::split_units(8, 3)) == P{{0, 3}, {3, 3}, {6, 2}});
    CHECK(pairs(aff::split_units(2, 3)) == P{{0, 1}, {1, 1}, {2, 0}});
    CHECK(pairs(aff::split_units(16, 8)) == P{{0, 2}, {2, 2}, {4, 2}, {6, 2}, {8, 2}, {10, 2}, {12, 2}, {14, 2}});
    CHECK(pairs(aff::split_units(5, 1)) == P{{0, 5}});
    CHECK(aff::rank_of_unit(aff::split_units(6, 4), 4) == 2);
    CHECK(aff::rank_of_unit(aff::split_units(6, 4), 6) == -1);
    CHECK_THROWS_AS(aff::split_units(4, 0), aff::Error);
}

TEST_CASE("every layer's shards cover each weight once, at 1 to 16 ranks, both expert forms", "[placement]") {
    for (const aff::ModelConfig& c : configs()) {
        const bool real = c.hidden_size == 4096;
        for (int ranks : {1, 2, 3, 4, 8, 16})
            for (ExpertSplit experts : {ExpertSplit::halved, ExpertSplit::whole})
                for (int l = 0; l < c.num_layers; ++l) {
                    aff::TensorSplitOptions o;
                    o.ranks = ranks;
                    o.experts = experts;
                    o.checkpoint_storage = real;
                    o.intermediate_unit = real ? 128 : 1;
                    INFO("D " << c.hidden_size << " layer " << l << " ranks " << ranks);
                    const LayerTensorPlan p = aff::plan_layer_split(c, l, o);
                    check_plan(p, ranks);
                    // One group split drives every attention weight: the heads a rank queries
                    // are the heads its output groups take in, whose wo_b columns it holds.
                    CHECK(pairs(p.groups) == pairs(aff::split_units(c.o_groups, ranks)));
                    for (const char* name : {"attn.attn_sink", "attn.wq_b", "attn.wo_a", "attn.wo_b"})
                        CHECK(pairs(weight(p, name).shards) == pairs(p.groups));
                    CHECK(weight(p, "attn.wq_b").kind == SplitKind::column);
                    CHECK(weight(p, "attn.wq_b").unit == std::size_t(c.num_heads / c.o_groups * c.head_dim));
                    CHECK(weight(p, "attn.wo_a").kind == SplitKind::column);
                    CHECK(weight(p, "attn.wo_b").kind == SplitKind::row);
                    CHECK(weight(p, "attn.wkv").kind == SplitKind::replicated);
                    CHECK(weight(p, "ffn.shared_experts.w1").kind == SplitKind::column);
                    CHECK(weight(p, "ffn.shared_experts.w2").kind == SplitKind::row);
                    CHECK(pairs(weight(p, "ffn.shared_experts.w2").shards) == pairs(p.intermediate));
                    CHECK(weight(p, "ffn.experts.w2").kind ==
                          (experts == ExpertSplit::halved ? SplitKind::row : SplitKind::by_expert));
                    CHECK(weight(p, "ffn.experts.w1").copies == std::size_t(c.n_routed_experts));
                    const bool compressed = c.attention[l] != aff::AttentionKind::sliding;
                    CHECK(std::count_if(p.weights.begin(), p.weights.end(),
                                        [](const WeightSplit& w) { return w.name == "attn.compressor.wkv"; }) ==
                          (compressed ? 1 : 0));
                    REQUIRE(p.collectives.size() == 2);
                    CHECK(p.collectives[0].after == "attn.wo_b");
                    CHECK(p.collectives[0].floats_per_token == std::size_t(c.hidden_size));
                    CHECK(p.collectives[1].floats_per_token == std::size_t(c.hidden_size));
                    CHECK_FALSE(p.collectives[0].gather);
                }
        for (int ranks : {1, 2, 3, 4, 8}) {
            aff::TensorSplitOptions o;
            o.ranks = ranks;
            o.checkpoint_storage = real;
            o.vocab_unit = real ? 128 : 1;
            const LayerTensorPlan g = aff::plan_global_split(c, o);
            check_plan(g, ranks);
            CHECK(weight(g, "head.weight").kind == SplitKind::column);
            REQUIRE(g.collectives.size() == 2);
            CHECK(g.collectives[1].gather);
            CHECK(g.collectives[1].floats_per_token == std::size_t(c.vocab_size));
        }
    }
}

TEST_CASE("V4-Flash's bytes per rank, halved experts and expert parallel", "[placement]") {
    const aff::ModelConfig c = aff::parse_model_config(aff::quant::deepseek_v4_flash_config(), "config");
    aff::TensorSplitOptions o;
    o.checkpoint_storage = true;
    o.intermediate_unit = 128;
    // One FP4 expert: w1, w3 [2048, 4096] and w2 [4096, 2048], half a byte a weight plus a
    // UE8M0 byte per 32 inputs: 3 · 2048 · (2048 + 128) bytes.
    const std::size_t expert = 3 * 2048 * (2048 + 128);
    CHECK(expert == 13'369'344);
    for (int ranks : {2, 4, 8}) {  // ranks dividing 256 experts and 16 blocks of 128 rows: equal halves
        o.ranks = ranks;
        o.experts = ExpertSplit::halved;
        const LayerTensorPlan halved = aff::plan_layer_split(c, 3, o);
        o.experts = ExpertSplit::whole;
        const LayerTensorPlan whole = aff::plan_layer_split(c, 3, o);
        for (int r = 0; r < ranks; ++r) {
            std::size_t h = 0, w = 0;
            for (const char* m : {"ffn.experts.w1", "ffn.experts.w2", "ffn.experts.w3"}) {
                h += weight(halved, m).rank_bytes[r];
                w += weight(whole, m).rank_bytes[r];
            }
            CHECK(h == 256 * expert / ranks);
            CHECK(w == 256 / ranks * expert);
        }
    }
    // Three ranks: 16 blocks of 128 intermediate rows go 6, 5, 5; round-robin experts 86, 85, 85.
    o.ranks = 3;
    o.experts = ExpertSplit::halved;
    const LayerTensorPlan h3 = aff::plan_layer_split(c, 3, o);
    CHECK(pairs(h3.intermediate) == std::vector<std::pair<int, int>>{{0, 6}, {6, 5}, {11, 5}});
    CHECK(weight(h3, "ffn.experts.w1").rank_bytes[0] == 256 * std::size_t(768) * (2048 + 128));
    CHECK(weight(h3, "ffn.experts.w2").rank_bytes[2] == 256 * std::size_t(4096) * (320 + 20));
    // wq_b: groups 3, 3, 2 of 8 heads of 512 rows, FP8 [rows, 1024] with a byte per 128×128 block.
    CHECK(weight(h3, "attn.wq_b").rank_bytes[0] == std::size_t(12288) * 1024 + 96 * 8);
    CHECK(weight(h3, "attn.wq_b").rank_bytes[2] == std::size_t(8192) * 1024 + 64 * 8);
    o.experts = ExpertSplit::whole;
    const LayerTensorPlan w3 = aff::plan_layer_split(c, 3, o);
    CHECK(weight(w3, "ffn.experts.w1").rank_bytes[0] == 86 * std::size_t(2048) * (2048 + 128));
    CHECK(weight(w3, "ffn.experts.w1").rank_bytes[1] == 85 * std::size_t(2048) * (2048 + 128));
    // A placement's owners: all but one expert on rank 1.
    o.expert_owner.assign(256, 1);
    o.expert_owner[7] = 0;
    const LayerTensorPlan skew = aff::plan_layer_split(c, 3, o);
    CHECK(weight(skew, "ffn.experts.w2").rank_bytes[0] == std::size_t(4096) * (1024 + 64));
    CHECK(weight(skew, "ffn.experts.w2").rank_bytes[1] == 255 * std::size_t(4096) * (1024 + 64));
    CHECK(weight(skew, "ffn.experts.w2").rank_bytes[2] == 0);
    // Sixteen ranks: eight output groups, so ranks 8-15 hold no attention heads.
    o.ranks = 16;
    o.expert_owner.clear();
    const LayerTensorPlan p16 = aff::plan_layer_split(c, 3, o);
    CHECK(weight(p16, "attn.wo_b").rank_bytes[7] == std::size_t(4096) * 1024 + 32 * 8);
    CHECK(weight(p16, "attn.wo_b").rank_bytes[8] == 0);
    // The head by vocabulary rows: 1010 blocks of 128 over 4 ranks, 253, 253, 252, 252.
    aff::TensorSplitOptions g;
    g.ranks = 4;
    g.checkpoint_storage = true;
    g.vocab_unit = 128;
    const LayerTensorPlan head = aff::plan_global_split(c, g);
    CHECK(weight(head, "head.weight").rank_bytes[0] == std::size_t(253) * 128 * 4096 * 2);
    CHECK(weight(head, "head.weight").rank_bytes[3] == std::size_t(252) * 128 * 4096 * 2);
}

TEST_CASE("a tensor split names what it cannot take", "[placement]") {
    const aff::ModelConfig c = aff::load_model_config(models + "/tiny-a/config.json");
    aff::TensorSplitOptions o;
    o.ranks = 0;
    CHECK(error_of(c, o) == "a tensor split needs at least one rank, not 0");
    o.ranks = 2;
    o.intermediate_unit = 5;
    CHECK(error_of(c, o) == "the intermediate split unit 5 does not divide 32");
    o.intermediate_unit = 1;
    o.experts = ExpertSplit::whole;
    o.expert_owner = {0, 1};
    CHECK(error_of(c, o) == "the expert owners name 2 experts, the layer has 8");
    o.expert_owner = {0, 1, 0, 1, 0, 1, 0, 2};
    CHECK(error_of(c, o) == "expert owner rank 2 is outside [0, 2)");
}

TEST_CASE("N slabs: V4-Flash's resident bytes per rank and the experts N slabs hold", "[placement]") {
    const aff::ModelConfig c = aff::parse_model_config(aff::quant::deepseek_v4_flash_config(), "config");
    aff::TensorSplitOptions o;
    o.checkpoint_storage = true;
    o.intermediate_unit = 128;
    o.vocab_unit = 128;
    const aff::RankSlabs one = aff::plan_rank_slabs(c, o);
    REQUIRE(one.dense_bytes.size() == 1);
    CHECK(one.expert_slot_bytes[0] == 13'369'344);
    CHECK(one.model_experts == 43 * 256);
    // The dense bytes as worked out separately from the model doc's §2.2-2.3 tables (FP8 with
    // its block scales, BF16, F32; tid2eid I64 on layers 0-2): 8.24 GiB on one card, 4.73 GiB on
    // each of two, 2.10 GiB on each of eight (ranks 0-1 take one more vocabulary block of 128).
    CHECK(one.dense_bytes[0] == 8'845'959'388u);
    o.ranks = 8;
    const aff::RankSlabs eight = aff::plan_rank_slabs(c, o);
    CHECK(eight.dense_bytes[0] == 2'259'554'940u);
    CHECK(eight.dense_bytes[7] == 2'257'457'788u);
    const std::size_t GiB = std::size_t(1) << 30;
    for (ExpertSplit experts : {ExpertSplit::halved, ExpertSplit::whole}) {
        o.experts = experts;
        o.ranks = 2;
        const aff::RankSlabs two = aff::plan_rank_slabs(c, o);
        // Each rank holds less than one card's dense weights, more than half (the replicated part).
        for (std::size_t d : two.dense_bytes) {
            CHECK(d < one.dense_bytes[0]);
            CHECK(2 * d > one.dense_bytes[0]);
        }
        CHECK(two.dense_bytes[0] == 5'081'400'924u);
        CHECK(two.dense_bytes[1] == 5'081'400'924u);
        CHECK(two.expert_slot_bytes[0] == (experts == ExpertSplit::halved ? 6'684'672u : 13'369'344u));
        // Two 20 GiB slabs: 21474836480 / 6684672 = 3212.6 halves on each card, or 1606.3 whole
        // experts on each card.
        CHECK(aff::resident_experts(two, {20 * GiB, 20 * GiB}) == 3212);
        CHECK(aff::resident_experts(two, {2000 * GiB, 2000 * GiB}) == 43 * 256);
        CHECK_THROWS_AS(aff::resident_experts(two, {20 * GiB}), aff::Error);
    }
    // Three ranks: intermediate rows 768, 640, 640, so rank 0's slot of 3 · 768 · 2176 bytes limits
    // the halved form (10 GiB / 5013504 = 2141.7) while whole experts fill every slab (3 · 803).
    o.ranks = 3;
    o.experts = ExpertSplit::halved;
    const aff::RankSlabs h3 = aff::plan_rank_slabs(c, o);
    CHECK(h3.expert_slot_bytes == std::vector<std::size_t>{5'013'504, 4'177'920, 4'177'920});
    CHECK(aff::resident_experts(h3, {10 * GiB, 10 * GiB, 10 * GiB}) == 2141);
    o.experts = ExpertSplit::whole;
    CHECK(aff::resident_experts(aff::plan_rank_slabs(c, o), {10 * GiB, 10 * GiB, 10 * GiB}) == 3 * 803);
}
