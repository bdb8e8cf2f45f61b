// Tests for the imatrix readers (libaff/quant/imatrix.cpp) and expert profiles
// (expert_profile.cpp), on files written by the small GGUF and .dat writers of
// imatrix_writer.hpp, good and damaged.
#include "libaff/core/error.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/quant/imatrix.hpp"
#include "unit/quant/imatrix_writer.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

using namespace aff::quant;
using namespace aff::test;

namespace {

// Layer 3 of a model with 3 experts: up (4 columns), down (2 columns), one dense tensor.
std::vector<GgufTensor> sample_tensors() {
    return {
        {"blk.3.ffn_up_exps.weight.in_sum2", {4, 3}, {4, 8, 12, 16, 1, 1, 1, 1, 0, 0, 0, 0}},
        {"blk.3.ffn_up_exps.weight.counts", {1, 3}, {4, 10, 0}},
        {"blk.3.ffn_down_exps.weight.in_sum2", {2, 3}, {1, 2, 3, 4, 5, 6}},
        {"blk.3.ffn_down_exps.weight.counts", {1, 3}, {4, 10, 0}},
        {"blk.3.attn_q_a.weight.in_sum2", {4, 1}, {2, 2, 2, 2}},
        {"blk.3.attn_q_a.weight.in_sum", {4, 1}, {-1, 1, -1, 1}},
        {"blk.3.attn_q_a.weight.counts", {1, 1}, {2}},
    };
}

}  // namespace

TEST_CASE("GGUF imatrix: entries, per-expert importance and the zero-count rule", "[quant]") {
    const Imatrix im = parse_imatrix(gguf(sample_tensors()), "m.gguf");
    CHECK_FALSE(im.legacy);
    REQUIRE(im.entries.size() == 3);
    CHECK(im.datasets == std::vector<std::string>{"calibration.txt"});
    CHECK(im.chunk_count == 12);
    const ImatrixEntry* up = im.find("blk.3.ffn_up_exps.weight");
    REQUIRE(up);
    CHECK(up->cols == 4);
    CHECK(up->matrices == 3);
    CHECK(im.importance(*up, 0, 4, 3) == std::vector<float>{1, 2, 3, 4});        // in_sum2 / 4
    CHECK(im.importance(*up, 1, 4, 3) == std::vector<float>{0.1f, 0.1f, 0.1f, 0.1f});
    CHECK(im.importance(*up, 2, 4, 3) == std::vector<float>{1, 1, 1, 1});        // count 0: no data
    CHECK_THROWS_WITH(im.importance(*up, 0, 8, 3),
                      Catch::Contains("tensor blk.3.ffn_up_exps.weight: is 4 columns x 3 matrices, the "
                                      "checkpoint's weight 8 x 3"));
}

TEST_CASE("llama.cpp expert tensor names map to our w1/w2/w3", "[quant]") {
    auto r = map_expert_tensor("blk.12.ffn_gate_exps.weight");
    REQUIRE(r);
    CHECK(r->layer == 12);
    CHECK((r->w1 && !r->w2 && !r->w3));
    r = map_expert_tensor("blk.0.ffn_gate_up_exps.weight");
    REQUIRE(r);
    CHECK((r->w1 && r->w3 && !r->w2));
    r = map_expert_tensor("blk.42.ffn_down_exps.weight");
    REQUIRE(r);
    CHECK((r->w2 && r->layer == 42));
    CHECK_FALSE(map_expert_tensor("blk.3.ffn_down_shexp.weight"));
    CHECK_FALSE(map_expert_tensor("blk.3.attn_q_a.weight"));
    CHECK_FALSE(map_expert_tensor("output.weight"));
    CHECK(expert_weight_name(3, 17, "w2") == "layers.3.ffn.experts.17.w2.weight");
}

// Names from llama.cpp's "deepseek4" architecture: its tensor table and V4 loader, and
// its converter's map from the checkpoint's names (w1 = gate, w3 = up, w2 = down).
TEST_CASE("llama.cpp DeepSeek-V4 tensor names map to our checkpoint names", "[quant]") {
    const auto ours = [](const std::string& name, int trunk) {
        const auto m = match_llama_tensor(name, trunk);
        return m ? m->ours : std::vector<std::string>{"(none)"};
    };
    using V = std::vector<std::string>;
    CHECK(ours("blk.3.attn_q_a.weight", 43) == V{"layers.3.attn.wq_a.weight"});
    CHECK(ours("blk.3.attn_q_b.weight", 43) == V{"layers.3.attn.wq_b.weight"});
    CHECK(ours("blk.3.attn_kv.weight", 43) == V{"layers.3.attn.wkv.weight"});
    CHECK(ours("blk.3.attn_output_a.weight", 43) == V{"layers.3.attn.wo_a.weight"});
    CHECK(ours("blk.3.attn_output_b.weight", 43) == V{"layers.3.attn.wo_b.weight"});
    CHECK(ours("blk.2.attn_compressor_kv.weight", 43) == V{"layers.2.attn.compressor.wkv.weight"});
    CHECK(ours("blk.2.indexer.attn_q_b.weight", 43) == V{"layers.2.attn.indexer.wq_b.weight"});
    CHECK(ours("blk.2.indexer.proj.weight", 43) == V{"layers.2.attn.indexer.weights_proj.weight"});
    CHECK(ours("blk.2.indexer_compressor_gate.weight", 43) == V{"layers.2.attn.indexer.compressor.wgate.weight"});
    CHECK(ours("blk.7.ffn_gate_inp.weight", 43) == V{"layers.7.ffn.gate.weight"});
    CHECK(ours("blk.7.ffn_gate_shexp.weight", 43) == V{"layers.7.ffn.shared_experts.w1.weight"});
    CHECK(ours("blk.7.ffn_down_shexp.weight", 43) == V{"layers.7.ffn.shared_experts.w2.weight"});
    CHECK(ours("blk.7.hc_ffn_fn.weight", 43) == V{"layers.7.hc_ffn_fn"});
    CHECK(ours("output.weight", 43) == V{"head.weight"});

    auto m = match_llama_tensor("blk.42.ffn_up_exps.weight", 43);
    REQUIRE(m);
    CHECK(m->ours == V{"layers.42.ffn.experts.{e}.w3.weight"});
    REQUIRE(m->experts);
    CHECK((m->experts->w3 && m->experts->layer == 42 && !m->mtp));
    // llama.cpp numbers V4-Flash's MTP block 43, after the 43 trunk layers.
    m = match_llama_tensor("blk.43.ffn_gate_exps.weight", 43);
    REQUIRE(m);
    CHECK(m->mtp);
    CHECK(m->ours == V{"mtp.0.ffn.experts.{e}.w1.weight"});
    CHECK(ours("blk.43.nextn.eh_proj.weight", 43) == V{"mtp.0.e_proj.weight", "mtp.0.h_proj.weight"});
    CHECK(ours("blk.43.attn_q_a.weight", 0) == V{"layers.43.attn.wq_a.weight"});  // trunk size unknown

    // Not DeepSeek-V4 matrices: names of other architectures, norms, malformed names.
    CHECK(ours("blk.3.attn_qkv.weight", 43) == V{"(none)"});
    CHECK(ours("blk.3.attn_q.weight", 43) == V{"(none)"});
    CHECK(ours("blk.3.attn_norm.weight", 43) == V{"(none)"});
    CHECK(ours("blk.3.nextn.eh_proj.weight", 43) == V{"(none)"});
    CHECK(ours("blk.x.attn_q_a.weight", 43) == V{"(none)"});
    CHECK(ours("token_embd.weight", 43) == V{"(none)"});
}

TEST_CASE("a damaged GGUF imatrix is one clear error, never a crash", "[quant][corrupt]") {
    Bytes good = gguf(sample_tensors());
    good.resize(good.size() - 28);  // the last tensor (4 bytes) is followed by padding only
    REQUIRE(parse_imatrix(good, "whole.gguf").entries.size() == 3);
    // Every truncation fails with an aff::Error.
    for (std::size_t n = 0; n < good.size(); n += (n < 200 ? 1 : 7)) {
        Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK_THROWS_AS(parse_imatrix(cut, "cut.gguf"), aff::Error);
    }
    CHECK_THROWS_WITH(parse_imatrix(gguf(sample_tensors(), "model"), "x.gguf"),
                      Catch::Contains("not an imatrix (general.type = \"model\")"));
    CHECK_THROWS_WITH(parse_imatrix(gguf(sample_tensors(), "imatrix", 1), "x.gguf"),
                      Catch::Contains("GGUF version 1"));
    auto t = sample_tensors();
    t.erase(t.begin() + 1);  // up without counts
    CHECK_THROWS_WITH(parse_imatrix(gguf(t), "x.gguf"),
                      Catch::Contains("tensor blk.3.ffn_up_exps.weight: has in_sum2 but no counts"));
    t = sample_tensors();
    t[1] = {"blk.3.ffn_up_exps.weight.counts", {1, 2}, {4, 10}};
    CHECK_THROWS_WITH(parse_imatrix(gguf(t), "x.gguf"), Catch::Contains("counts has 2 values for 3 matrices"));
    t = sample_tensors();
    t[0].data[5] = -1;
    CHECK_THROWS_WITH(parse_imatrix(gguf(t), "x.gguf"),
                      Catch::Contains("tensor blk.3.ffn_up_exps.weight.in_sum2 value 5 is negative or not finite"));
    t = sample_tensors();
    t.push_back({"blk.4.ffn_up_exps.weight.counts", {1, 3}, {1, 1, 1}});
    CHECK_THROWS_WITH(parse_imatrix(gguf(t), "x.gguf"), Catch::Contains("has no blk.4.ffn_up_exps.weight.in_sum2"));
    Bytes huge = good;
    std::uint64_t many = 1ull << 40;
    std::memcpy(&huge[8], &many, 8);
    CHECK_THROWS_WITH(parse_imatrix(huge, "x.gguf"), Catch::Contains("tensor count 1099511627776 is implausible"));
}

TEST_CASE("legacy .dat imatrix: values are E[x²]·ncall, expert-major", "[quant]") {
    const Imatrix im = parse_imatrix(
        dat({{"blk.1.ffn_up_exps.weight", {2, 4, 6, 8, 10, 12}}, {"blk.1.attn_q_a.weight", {1, 1}}}, 2, true), "m.dat");
    CHECK(im.legacy);
    REQUIRE(im.entries.size() == 2);
    CHECK(im.chunk_count == 7);
    CHECK(im.datasets == std::vector<std::string>{"wiki"});
    const auto* up = im.find("blk.1.ffn_up_exps.weight");
    REQUIRE(up);
    CHECK(im.importance(*up, 0, 2, 3) == std::vector<float>{1, 2});
    CHECK(im.importance(*up, 2, 2, 3) == std::vector<float>{5, 6});
    CHECK_THROWS_WITH(im.importance(*up, 0, 4, 3),
                      Catch::Contains("has 6 values, the checkpoint's weight needs 4 columns x 3 matrices"));
    // Without the optional trailer too.
    CHECK(parse_imatrix(dat({{"a.weight", {1}}}, 1, false), "m.dat").entries.size() == 1);
    ExpertProfile p;
    CHECK_THROWS_WITH(profile_from_imatrix(im, 0, nullptr), Catch::Contains("legacy .dat imatrix has no per-expert counts"));
}

TEST_CASE("a damaged .dat imatrix is one clear error", "[quant][corrupt]") {
    const Bytes good = dat({{"blk.1.ffn_up_exps.weight", {2, 4, 6, 8}}}, 2, true);
    for (std::size_t n = 0; n < good.size(); ++n) {
        Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        // A cut inside the optional trailer may still leave a readable file; never a crash.
        try {
            parse_imatrix(cut, "cut.dat");
        } catch (const aff::Error&) {
        }
    }
    CHECK_THROWS_WITH(parse_imatrix(Bytes(good.begin(), good.begin() + 30), "cut.dat"), Catch::Contains("truncated"));
    CHECK_THROWS_WITH(parse_imatrix(dat({}, 1, false), "e.dat"), Catch::Contains("entry count 0 is not plausible"));
    CHECK_THROWS_WITH(parse_imatrix(dat({{"x.weight", {}}}, 1, false), "e.dat"),
                      Catch::Contains("tensor x.weight: nval 0 is not positive"));
    CHECK_THROWS_WITH(parse_imatrix(dat({{"x.weight", {1.0f, -2.0f}}}, 1, false), "e.dat"),
                      Catch::Contains("tensor x.weight: value 1 is negative or not finite"));
    CHECK_THROWS_WITH(parse_imatrix(dat({{"x.weight", {1.0f}}}, -3, false), "e.dat"),
                      Catch::Contains("ncall -3 is negative"));
    Bytes extra = good;
    extra.push_back(0);
    CHECK_THROWS_WITH(parse_imatrix(extra, "e.dat"), Catch::Contains("1 trailing bytes"));
    const Bytes text = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'};
    CHECK_THROWS_WITH(parse_imatrix(text, "notes.txt"), Catch::Contains("notes.txt"));
}

TEST_CASE("profile from an imatrix: counts per layer and expert, unmatched tensors reported", "[quant]") {
    auto tensors = sample_tensors();
    tensors.push_back({"blk.3.attn_qkv.weight.in_sum2", {4, 1}, {1, 1, 1, 1}});  // no V4 tensor
    tensors.push_back({"blk.3.attn_qkv.weight.counts", {1, 1}, {2}});
    const Imatrix im = parse_imatrix(gguf(tensors), "m.gguf");
    ProfileFromImatrixReport report;
    const ExpertProfile p = profile_from_imatrix(im, 0, &report);
    CHECK(p.layers == 4);
    CHECK(p.experts == 3);
    CHECK(p.source == ProfileSource::imatrix);
    CHECK(p.count(3, 0) == 4);
    CHECK(p.count(3, 1) == 10);
    CHECK(p.count(3, 2) == 0);
    CHECK(p.count(0, 1) == 0);
    CHECK(report.unmatched == std::vector<std::string>{"blk.3.attn_qkv.weight"});
    CHECK(report.other_tensors == 1);  // blk.3.attn_q_a: a V4 matrix, but no routed expert
    ProfileFromImatrixReport capped;
    CHECK_THROWS_WITH(profile_from_imatrix(im, 2, &capped), Catch::Contains("no routed-expert tensors"));
    CHECK(capped.ignored_layers == std::vector<int>{3});

    const auto s = summarize(p);
    REQUIRE(s.size() == 4);
    CHECK(s[3].activations == 14);
    CHECK(s[3].used == 2);
    CHECK(s[3].for_half == 1);
    CHECK(s[3].for_80 == 2);
    CHECK(s[3].top_share == Approx(10.0 / 14));
    CHECK(s[0].activations == 0);
    const auto top = top_experts(p, 2);
    REQUIRE(top.size() == 8);
    CHECK((top[6].layer == 3 && top[6].expert == 1 && top[6].count == 10));
    CHECK((top[7].expert == 0 && top[7].count == 4));
}

TEST_CASE("profile bytes round-trip and damaged ones are rejected", "[quant][corrupt]") {
    ExpertProfile p;
    p.layers = 2;
    p.experts = 3;
    p.source = ProfileSource::imatrix;
    p.counts = {1, 2, 3, 4, 5, 6};
    const Bytes b = p.serialize();
    CHECK(b.size() == 32 + 6 * 8 + 8);
    const ExpertProfile q = ExpertProfile::parse(b, "");
    CHECK(q.counts == p.counts);
    CHECK(q.layers == 2);
    Bytes bad = b;
    bad[40] ^= 1;
    CHECK_THROWS_WITH(ExpertProfile::parse(bad, "p.afp"), Catch::Contains("digest mismatch"));
    bad = b;
    bad[2] = 'X';
    CHECK_THROWS_WITH(ExpertProfile::parse(bad, ""), Catch::Contains("not an expert profile (bad magic)"));
    CHECK_THROWS_WITH(ExpertProfile::parse(Bytes(b.begin(), b.begin() + 20), ""), Catch::Contains("truncated"));
    CHECK_THROWS_WITH(ExpertProfile::parse(Bytes(b.begin(), b.end() - 8), ""), Catch::Contains("counts need 88"));
    bad = b;
    bad[24] = 1;
    CHECK_THROWS_WITH(ExpertProfile::parse(bad, ""), Catch::Contains("reserved field is not zero"));
    bad = b;
    bad[20] = 9;
    CHECK_THROWS_WITH(ExpertProfile::parse(bad, ""), Catch::Contains("source 9 is not defined"));
}

TEST_CASE("counts that would overflow the profile's 64-bit sums are refused", "[quant][corrupt]") {
    // A profile file whose counts sum past 2^63: it printed 0 activations and shares of 3e20 %.
    ExpertProfile p;
    p.layers = 1;
    p.experts = 2;
    p.source = ProfileSource::imatrix;
    p.counts = {std::uint64_t(1) << 63, std::uint64_t(1) << 63};
    CHECK_THROWS_WITH(ExpertProfile::parse(p.serialize(), "p.afp"), Catch::Contains("sum past 2^63"));
    p.counts = {(std::uint64_t(1) << 62), (std::uint64_t(1) << 62) - 1};
    CHECK(ExpertProfile::parse(p.serialize(), "p.afp").counts == p.counts);

    // An imatrix with counts of 1e38: no count of tokens, and llround() of it is undefined.
    auto tensors = sample_tensors();
    tensors[1].data = {4, 1e38f, 0};
    CHECK_THROWS_WITH(parse_imatrix(gguf(tensors), "m.gguf"),
                      Catch::Contains("tensor blk.3.ffn_up_exps.weight.counts value 1 is") &&
                          Catch::Contains("more than 2^53 tokens"));
}
