// The CPU emulation of a tensor-parallel layer (issue 20): each rank runs the CPU reference's
// own sub-layer ops on its shard of a LayerTensorPlan (Model::attention_block / moe_block with
// a SubLayerShard), from its own copy of the replicated state, and the ranks' partial sums are
// added the way a deterministic all-reduce adds them. Tests hold the sum to the unsplit op
// (tests/unit/placement/tensor_split_test.cpp); the device path (NCCL) is not built yet.
//
// How N changes the summation: the unsplit op sums each output over all of its inputs in the
// reference's dot order (four interleaved lanes, combined as (s0 + s1) + (s2 + s3)). Split N
// ways, rank r sums only its shard's inputs in that order (its own four lanes), and the N
// partials are then added in rank order, ((p0 + p1) + p2) + ...: the same terms, grouped at
// the shard boundaries. For N = 1 the grouping is the unsplit one and the result is
// bit-identical; for a given N it is one fixed order, so the same N gives the same bits
// whatever the timing. The routed experts split whole add each rank's own chosen experts
// first, then the ranks; halved, every expert's down projection is cut at the shards.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/placement/tensor_split.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace aff {

// out[i] = ((p[0][i] + p[1][i]) + p[2][i]) + ...: an all-reduce in rank order.
std::vector<float> all_reduce_in_rank_order(const std::vector<std::vector<float>>& partials);

struct SplitRun {
    std::vector<std::vector<float>> partials;  // per rank, [n, D]
    std::vector<float> sum;                    // all_reduce_in_rank_order(partials)
    std::vector<LayerState> states;            // each rank's replicated state afterwards
};

// The shard of rank r of `plan` as the forward takes it.
SubLayerShard rank_shard(const LayerTensorPlan& plan, int rank, std::vector<char>& owned_storage);

// Main layer `layer`'s attention of n tokens at positions start.., a [n, D], split per `plan`:
// every rank starts from a copy of `state`.
SplitRun run_attention_split(const Model& model, const LayerTensorPlan& plan, int layer, const LayerState& state,
                             std::int64_t start, int n, const float* a);

// Main layer `layer`'s MoE of `tokens` at positions start.., b [n, D], split per `plan`.
SplitRun run_moe_split(const Model& model, const LayerTensorPlan& plan, int layer, std::span<const std::int32_t> tokens,
                       std::int64_t start, const float* b);

// max_i |x[i] − ref[i]| / max_i |ref[i]| (0 when both are zero): the normwise relative error
// the tests bound.
double max_relative_error(std::span<const float> x, std::span<const float> ref);

}  // namespace aff
