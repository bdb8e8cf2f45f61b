// The fidelity sweep on the CPU: for every case of tests/common/v4_sweep.hpp (valid V4 configs drawn
// across every knob of the spec, weights regenerated from the case number), aff's CPU forward
// against DeepSeek's reference inference code on the same weights (golden logits in tests/data/sweep,
// made by tests/oracle/fidelity_sweep.py; the reference run in float32 without its QAT simulations,
// top-k ties broken by the lower index). At every position, in three chunkings — the whole prompt,
// uneven chunks, one token at a time — max|Δ| ≤ 1e-4 · max|reference logit|, and the argmax is the
// reference's wherever its top-2 margin exceeds 1e-3 of that scale. The chunkings must also agree with
// each other, since a causal model's logits cannot depend on how its prompt was cut.
#include "../temp_dir.hpp"
#include "common/sweep_golden.hpp"
#include "common/v4_sweep.hpp"

#include "libaff/checkpoint/safetensors.hpp"
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace {


struct Agreement {
    double worst = 0;       // max over positions of max|Δ| / max|reference|
    int worst_at = -1;
    int argmax_flips = 0;   // where the reference's top-2 margin exceeds 1e-3 of its scale
};

Agreement agreement(const std::vector<float>& got, const std::vector<float>& ref, int V) {
    Agreement a;
    const int S = int(ref.size() / V);
    for (int p = 0; p < S; ++p) {
        const float* r = &ref[std::size_t(p) * V];
        const float* g = &got[std::size_t(p) * V];
        double scale = 0, diff = 0;
        int rg = 0, gg = 0;
        for (int v = 0; v < V; ++v) {
            scale = std::max(scale, double(std::fabs(r[v])));
            diff = std::max(diff, std::fabs(double(g[v]) - r[v]));
            if (r[v] > r[rg]) rg = v;
            if (g[v] > g[gg]) gg = v;
        }
        double second = -INFINITY;
        for (int v = 0; v < V; ++v)
            if (v != rg) second = std::max(second, double(r[v]));
        const double rel = diff / std::max(scale, 1e-30);
        if (rel > a.worst) a.worst = rel, a.worst_at = p;
        if (rg != gg && (r[rg] - second) > 1e-3 * scale) ++a.argmax_flips;
    }
    return a;
}


std::vector<float> run_chunks(const aff::Model& m, const std::vector<std::int32_t>& tokens, const std::vector<int>& plan) {
    aff::DecodeState st = m.new_state();
    std::vector<float> all;
    std::size_t at = 0;
    for (int c : plan) {
        auto part = m.forward(st, std::span(tokens).subspan(at, std::size_t(c)), true);
        all.insert(all.end(), part.begin(), part.end());
        at += std::size_t(c);
    }
    return all;
}

}  // namespace

TEST_CASE("every sweep config matches DeepSeek's reference in every chunking", "[model][sweep]") {
    aff::ThreadPool pool(2);
    double worst = 0;
    std::string worst_where;
    for (int i = 0; i < aff::test::kSweepCases; ++i) {
        const aff::test::SweepCase c = aff::test::sweep_case(i);
        INFO(c.name << ": " << c.g.layer_types.size() << " layers, H " << c.g.heads << " G " << c.g.o_groups << " Dh "
                    << c.g.head_dim << " rope " << c.g.rope_dim << " W " << c.g.window << " HCA " << c.g.hca_ratio
                    << " indexer " << c.g.index_heads << "x" << c.g.index_head_dim << " top-k " << c.g.index_topk
                    << " experts " << c.g.experts << "/" << c.g.experts_per_token << " hc " << c.g.hc
                    << (c.dense_fp8 ? " fp8" : "") << (c.g.fp4_experts ? " fp4" : ""));
        aff::test::TempDir dir;
        aff::test::write_sweep_checkpoint(c, dir / "ckpt");
        auto model = aff::Model::load(dir / "ckpt", pool);
        const aff::test::SweepGolden g = aff::test::read_sweep_golden(std::string(AFF_TEST_DATA) + "/sweep/" + c.name + ".safetensors");
        const int V = model->config().vocab_size;
        const int S = int(g.tokens.size());
        REQUIRE(S == c.sequence);
        REQUIRE(g.logits.size() == std::size_t(S) * V);
        const std::vector<int> whole{S}, ones(std::size_t(S), 1), uneven = aff::test::sweep_chunk_plan(S, i);
        const std::vector<float> a = run_chunks(*model, g.tokens, whole);
        for (const auto& [what, plan] : {std::pair{"whole prompt", whole}, std::pair{"uneven chunks", uneven},
                                         std::pair{"token by token", ones}}) {
            INFO(what);
            const std::vector<float> got = plan.size() == 1 ? a : run_chunks(*model, g.tokens, plan);
            const Agreement r = agreement(got, g.logits, V);
            INFO("worst relative difference " << r.worst << " at position " << r.worst_at);
            CHECK(r.worst <= 1e-4);
            if (r.worst > worst) worst = r.worst, worst_where = c.name + ", " + what;
            CHECK(r.argmax_flips == 0);
            // The chunkings against each other, not only against the oracle.
            CHECK(agreement(got, a, V).worst <= 1e-4);
        }
    }
    std::printf("sweep: %d configs, worst max|d|/max|reference| %.3g (%s)\n", aff::test::kSweepCases, worst,
                worst_where.c_str());
}

// Item 2's "transformers-saved names": every case re-saved as transformers' save_pretrained writes
// it (fused experts, every weight BF16: the FP8 and FP4 values are BF16 values, so it is the same
// function) loads through the other naming and gives the official checkpoint's logits bit for bit,
// hence the reference's within the bound above.
TEST_CASE("every sweep config saved under transformers' names gives the same logits", "[model][sweep]") {
    aff::ThreadPool pool(2);
    for (int i = 0; i < aff::test::kSweepCases; ++i) {
        const aff::test::SweepCase c = aff::test::sweep_case(i);
        INFO(c.name << (c.dense_fp8 ? " fp8" : "") << (c.g.fp4_experts ? " fp4" : ""));
        aff::test::TempDir dir;
        aff::test::write_sweep_checkpoint(c, dir / "official");
        aff::test::write_sweep_checkpoint_transformers(c, dir / "transformers");
        auto official = aff::Model::load(dir / "official", pool);
        auto renamed = aff::Model::load(dir / "transformers", pool);
        const aff::test::SweepGolden g = aff::test::read_sweep_golden(std::string(AFF_TEST_DATA) + "/sweep/" + c.name + ".safetensors");
        const int V = official->config().vocab_size, S = int(g.tokens.size());
        const std::vector<float> a = run_chunks(*official, g.tokens, {S});
        const std::vector<float> b = run_chunks(*renamed, g.tokens, {S});
        REQUIRE(a.size() == b.size());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        CHECK(agreement(b, g.logits, V).worst <= 1e-4);
    }
}
