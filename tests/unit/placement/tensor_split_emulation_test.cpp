// Tests for libaff/placement/tensor_split_emulation: every main layer of every fixture, its
// attention and its MoE (experts halved, whole round robin, whole on a skewed owner list) run
// split 1, 2, 3, 4 and 8 ways on the CPU reference and summed in rank order, against the
// unsplit op: bit-identical at one rank, within kSplitBound (normwise relative) otherwise,
// bit-identical between two runs of the same split, the replicated state (ring, compressor and
// indexer entries) identical on every rank, and a rank's partial zero exactly when its shard is
// empty. Inputs: a prefill chunk of 20 tokens (CSA and HCA windows close in it), then 5 more.
#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"
#include "libaff/placement/tensor_split_emulation.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using aff::ExpertSplit;

namespace {

const std::string models = std::string(AFF_TEST_DATA) + "/models";

// The bound the split sums are held to: max |split − unsplit| / max |unsplit| over a sub-layer's
// output. Only the grouping of float32 sums changes (tensor_split_emulation.hpp); measured on
// these inputs at 2-8 ranks: attention at most 2.1e-7, MoE at most 4.1e-7 (experts halved; whole
// 1.5e-7), i.e. a few float32 ulps of the output's largest value. The bound leaves 5× room and
// is far below what a missing shard does (the last test case: a rank's partial alone is off by
// more than 1e-2).
constexpr double kSplitBound = 2e-6;

// Deterministic inputs in [-1, 1) (no library distribution: the same on every platform).
std::vector<float> inputs(std::size_t count, std::uint64_t seed) {
    std::vector<float> v(count);
    for (float& x : v) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x = float(double(seed >> 40) / double(1ull << 24) * 2.0 - 1.0);
    }
    return v;
}

bool all_zero(const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}

bool same_state(const aff::LayerState& a, const aff::LayerState& b) {
    return a.ring == b.ring && a.compressor.entries == b.compressor.entries && a.compressor.count == b.compressor.count &&
           a.compressor.pending_kv == b.compressor.pending_kv && a.indexer.entries == b.indexer.entries &&
           a.indexer.count == b.indexer.count;
}

struct Chunk {
    std::int64_t start;
    int n;
};
constexpr Chunk kChunks[] = {{0, 20}, {20, 5}};

}  // namespace

TEST_CASE("attention split N ways sums to the unsplit attention", "[placement]") {
    aff::ThreadPool pool(2);
    for (const char* name : {"tiny-a", "tiny-b", "tiny-c", "tiny-trained"}) {
        const auto model = aff::Model::load(models + "/" + name, pool);
        const aff::ModelConfig& c = model->config();
        aff::DecodeState fresh = model->new_state();
        for (int l = 0; l < c.num_layers; ++l) {
            aff::LayerState ref_state = fresh.layers[l];
            for (const Chunk& chunk : kChunks) {
                INFO(name << " layer " << l << " chunk at " << chunk.start);
                const std::vector<float> a = inputs(std::size_t(chunk.n) * c.hidden_size, 17 + l + chunk.start);
                const aff::LayerState before = ref_state;
                std::vector<float> ref(a.size());
                model->attention_block(l, ref_state, chunk.start, chunk.n, a.data(), ref.data());
                REQUIRE_FALSE(all_zero(ref));
                for (int ranks : {1, 2, 3, 4, 8}) {
                    INFO(ranks << " ranks");
                    aff::TensorSplitOptions o;
                    o.ranks = ranks;
                    const aff::LayerTensorPlan plan = aff::plan_layer_split(c, l, o);
                    const aff::SplitRun run = aff::run_attention_split(*model, plan, l, before, chunk.start, chunk.n, a.data());
                    if (ranks == 1)
                        CHECK(run.sum == ref);
                    else
                        CHECK(aff::max_relative_error(run.sum, ref) <= kSplitBound);
                    for (int r = 0; r < ranks; ++r) {
                        CHECK(same_state(run.states[r], ref_state));
                        CHECK(all_zero(run.partials[r]) == (plan.groups[r].count == 0));
                    }
                    const aff::SplitRun again = aff::run_attention_split(*model, plan, l, before, chunk.start, chunk.n, a.data());
                    CHECK(again.sum == run.sum);
                }
            }
        }
    }
}

TEST_CASE("the MoE split N ways, experts halved or whole, sums to the unsplit MoE", "[placement]") {
    aff::ThreadPool pool(2);
    for (const char* name : {"tiny-a", "tiny-b", "tiny-c", "tiny-trained"}) {
        const auto model = aff::Model::load(models + "/" + name, pool);
        const aff::ModelConfig& c = model->config();
        for (int l = 0; l < c.num_layers; ++l) {
            const int n = 20;
            const std::vector<float> b = inputs(std::size_t(n) * c.hidden_size, 91 + l);
            std::vector<std::int32_t> tokens(n);
            for (int t = 0; t < n; ++t) tokens[t] = (37 * t + 11 * l + 3) % c.vocab_size;
            std::vector<float> ref(b.size());
            model->moe_block(l, tokens, 0, b.data(), ref.data());
            REQUIRE_FALSE(all_zero(ref));
            for (int ranks : {1, 2, 3, 4, 8})
                for (int form = 0; form < 3; ++form) {
                    INFO(name << " layer " << l << " ranks " << ranks << " form " << form);
                    aff::TensorSplitOptions o;
                    o.ranks = ranks;
                    o.experts = form == 0 ? ExpertSplit::halved : ExpertSplit::whole;
                    if (form == 2) o.expert_owner.assign(c.n_routed_experts, ranks - 1);  // one rank owns every expert
                    const aff::LayerTensorPlan plan = aff::plan_layer_split(c, l, o);
                    const aff::SplitRun run = aff::run_moe_split(*model, plan, l, tokens, 0, b.data());
                    if (ranks == 1)
                        CHECK(run.sum == ref);
                    else
                        CHECK(aff::max_relative_error(run.sum, ref) <= kSplitBound);
                    for (int r = 0; r < ranks; ++r) {
                        const bool owns = form == 0 ? plan.intermediate[r].count > 0
                                                    : std::count(plan.expert_owner.begin(), plan.expert_owner.end(), r) > 0;
                        CHECK(all_zero(run.partials[r]) == (!owns && plan.intermediate[r].count == 0));
                    }
                    const aff::SplitRun again = aff::run_moe_split(*model, plan, l, tokens, 0, b.data());
                    CHECK(again.sum == run.sum);
                }
        }
    }
}

TEST_CASE("a partial sum left out of the all-reduce is caught by the bound", "[placement]") {
    aff::ThreadPool pool(2);
    const auto model = aff::Model::load(models + "/tiny-trained", pool);
    const aff::ModelConfig& c = model->config();
    const int n = 5;
    const std::vector<float> a = inputs(std::size_t(n) * c.hidden_size, 5);
    aff::LayerState st = model->new_state().layers[1];
    const aff::LayerState before = st;
    std::vector<float> ref(a.size());
    model->attention_block(1, st, 0, n, a.data(), ref.data());
    aff::TensorSplitOptions o;
    o.ranks = 2;
    const aff::SplitRun run = aff::run_attention_split(*model, aff::plan_layer_split(c, 1, o), 1, before, 0, n, a.data());
    CHECK(aff::max_relative_error(run.partials[0], ref) > 1e-2);
    CHECK(aff::max_relative_error(run.partials[1], ref) > 1e-2);
    CHECK(aff::all_reduce_in_rank_order({{1.0f, 2.0f}, {0.5f, -2.0f}, {0.25f, 0.0f}}) == std::vector<float>{1.75f, 0.0f});
}
