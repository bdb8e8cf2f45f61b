// Runs a layer's sub-layers split N ways on the CPU reference (see tensor_split_emulation.hpp).
#include "libaff/placement/tensor_split_emulation.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace aff {

std::vector<float> all_reduce_in_rank_order(const std::vector<std::vector<float>>& partials) {
    if (partials.empty()) throw_internal("all_reduce_in_rank_order: no ranks");
    std::vector<float> out = partials[0];
    for (std::size_t r = 1; r < partials.size(); ++r) {
        if (partials[r].size() != out.size()) throw_internal("all_reduce_in_rank_order: ranks disagree on the size");
        for (std::size_t i = 0; i < out.size(); ++i) out[i] += partials[r][i];
    }
    return out;
}

SubLayerShard rank_shard(const LayerTensorPlan& plan, int rank, std::vector<char>& owned_storage) {
    if (rank < 0 || rank >= plan.ranks) throw_internal("rank_shard: rank out of range");
    SubLayerShard s;
    s.group_first = plan.groups[rank].first;
    s.group_end = plan.groups[rank].end();
    s.inter_first = plan.intermediate[rank].first * plan.intermediate_unit;
    s.inter_end = plan.intermediate[rank].end() * plan.intermediate_unit;
    if (plan.experts == ExpertSplit::whole) {
        owned_storage.assign(plan.expert_owner.size(), 0);
        for (std::size_t e = 0; e < plan.expert_owner.size(); ++e) owned_storage[e] = plan.expert_owner[e] == rank;
        s.owned = &owned_storage;
    }
    return s;
}

namespace {

template <class RunRank>
SplitRun run_split(const LayerTensorPlan& plan, std::size_t out_size, const LayerState* state, RunRank run_rank) {
    SplitRun run;
    for (int r = 0; r < plan.ranks; ++r) {
        std::vector<char> owned;
        const SubLayerShard shard = rank_shard(plan, r, owned);
        std::vector<float> out(out_size);
        if (state) run.states.push_back(*state);
        run_rank(shard, state ? &run.states.back() : nullptr, out.data());
        run.partials.push_back(std::move(out));
    }
    run.sum = all_reduce_in_rank_order(run.partials);
    return run;
}

}  // namespace

SplitRun run_attention_split(const Model& model, const LayerTensorPlan& plan, int layer, const LayerState& state,
                             std::int64_t start, int n, const float* a) {
    return run_split(plan, std::size_t(n) * model.config().hidden_size, &state,
                     [&](const SubLayerShard& shard, LayerState* st, float* out) {
                         model.attention_block(layer, *st, start, n, a, out, shard);
                     });
}

SplitRun run_moe_split(const Model& model, const LayerTensorPlan& plan, int layer, std::span<const std::int32_t> tokens,
                       std::int64_t start, const float* b) {
    return run_split(plan, tokens.size() * model.config().hidden_size, nullptr,
                     [&](const SubLayerShard& shard, LayerState*, float* out) {
                         model.moe_block(layer, tokens, start, b, out, shard);
                     });
}

double max_relative_error(std::span<const float> x, std::span<const float> ref) {
    if (x.size() != ref.size()) throw_internal("max_relative_error: sizes differ");
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        diff = std::max(diff, std::fabs(double(x[i]) - double(ref[i])));
        scale = std::max(scale, std::fabs(double(ref[i])));
    }
    return scale == 0 ? (diff == 0 ? 0.0 : INFINITY) : diff / scale;
}

}  // namespace aff
