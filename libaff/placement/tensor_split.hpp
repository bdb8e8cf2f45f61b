// How a layer's weights are cut across N tensor-parallel ranks (--gpus N as tensor ranks rather
// than a layer split, issue 20): for every weight, column-split (a shard of its output rows),
// row-split (a shard of its input columns) or replicated, the all-reduce each sub-layer ends
// with, and the bytes each rank holds, for the routed experts in both forms (every expert
// halved across the ranks, or each expert whole on its owner: expert parallel), so the
// placement engine can see N slabs. Pure arithmetic on the config, so CPU builds compile it;
// tensor_split_emulation.hpp runs the CPU reference split this way and tests the sums
// (tests/unit/placement/tensor_split_test.cpp).
//
// Why each weight is cut the way it is (model doc §3.4-3.10):
// - The attention is split by output groups: a group's H/G heads (their wq_b rows and sink
//   logits), its Ro rows of wo_a, and its Ro input columns of wo_b. A rank's heads then feed
//   only its own groups, so its wo_b product is a partial sum of the output: one all-reduce
//   ends the sub-layer. With more ranks than groups the extra ranks hold no attention.
// - wq_a / q_norm (the norm needs all of cq, which feeds every head and the indexer), the
//   latent wkv / kv_norm (the one key and value of every head), the compressors (their entries
//   are keys of every head and are RMS-normalised over their whole width) and the indexer (its
//   score is a sum over its heads before a top-k) are replicated: splitting any of them adds a
//   second collective to the sub-layer.
// - The shared expert and, halved, every routed expert are split by intermediate rows: w1/w3
//   column-split, w2 row-split by the same rows (SwiGLU is element-wise on them). Expert
//   parallel instead gives each rank whole experts; either way the routed and shared partials
//   go in the same all-reduce as the MoE sub-layer's output.
// - The head is split by vocabulary rows (each rank's logits are whole: an all-gather, no sum);
//   the embedding by vocabulary rows too (the owner of a token's row contributes it, the others
//   zeros: an exact all-reduce). Norms, mHC and the router are replicated (small, and needed
//   whole by every rank: the residual streams stay replicated and identical on every rank).
#pragma once

#include "libaff/checkpoint/config.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace aff {

// units first .. first + count - 1 of a split dimension.
struct Shard {
    int first = 0, count = 0;
    int end() const { return first + count; }
};

// The uneven rule: `units` over `ranks` in rank order, the first units % ranks ranks one more
// (6 over 4: 2, 2, 1, 1; 2 over 3: 1, 1, 0). Throws a usage error for ranks < 1 or units < 0.
std::vector<Shard> split_units(int units, int ranks);

// column: a shard of output rows; row: a shard of input columns; replicated: whole on every rank;
// by_expert: routed experts whole, each on its owner rank.
enum class SplitKind { column, row, replicated, by_expert };
enum class ExpertSplit { halved, whole };  // every expert across the ranks / each on its owner

// How a weight is stored, for its bytes (model doc §2.1): the CPU reference's float32, BF16,
// FP8 with one UE8M0 scale per 128×128 block, FP4 (E2M1) with one UE8M0 scale per 32 inputs,
// the hash table's I64.
enum class Storage { f32, bf16, fp8_block128, fp4_group32, i64 };
// Bytes of a [rows, cols] slab (scales included).
std::size_t slab_bytes(Storage s, std::size_t rows, std::size_t cols);

// Where a weight sits in the layer: which all-reduce its partials join.
enum class SubLayer { embedding, attention, moe, head };

struct WeightSplit {
    std::string name;     // the official name ("attn.wq_b", "ffn.experts.w1", "head")
    SubLayer sub_layer = SubLayer::attention;
    SplitKind kind = SplitKind::replicated;
    Storage storage = Storage::f32;
    std::size_t rows = 0, cols = 0;  // the whole logical shape [rows, cols]
    std::size_t copies = 1;          // identical copies in the layer (routed experts: E)
    std::size_t unit = 0;            // rows (column split) or columns (row split) per unit
    std::vector<Shard> shards;       // per rank, in units; empty when replicated
    std::vector<std::size_t> rank_bytes;  // per rank (a replicated weight: whole on every rank)
    std::size_t whole_bytes = 0;          // the unsplit weight, all copies
};

// One all-reduce (or all-gather) of the forward: what it sums and how many floats per token.
struct Collective {
    std::string after;      // the op whose partials it combines ("attn.wo_b")
    bool gather = false;    // all-gather of disjoint slices (the head), not a sum
    std::size_t floats_per_token = 0;
};

struct TensorSplitOptions {
    int ranks = 1;
    ExpertSplit experts = ExpertSplit::halved;
    // Whole experts: owner rank of each of the layer's experts (a placement's choice); empty:
    // round robin (expert e on rank e mod ranks).
    std::vector<int> expert_owner;
    // Granularity of the intermediate and vocabulary splits, in rows: the quantisation block
    // (128 for FP8 blocks) keeps every shard's scales its own; 1 for float32.
    int intermediate_unit = 1;
    int vocab_unit = 1;
    bool checkpoint_storage = false;  // bytes as the checkpoint stores them; else float32
};

struct LayerTensorPlan {
    int ranks = 1;
    ExpertSplit experts = ExpertSplit::halved;
    std::vector<Shard> groups;        // output groups per rank (heads: group × H/G)
    std::vector<Shard> intermediate;  // intermediate rows per rank, in units of intermediate_unit rows
    int intermediate_unit = 1;
    std::vector<int> expert_owner;    // whole experts: owner of each expert
    std::vector<WeightSplit> weights; // every weight of the layer
    std::vector<Collective> collectives;  // in forward order: one per sub-layer
    std::vector<std::size_t> rank_bytes;  // the layer's bytes on each rank (all weights)
    std::size_t replicated_bytes = 0;     // of those, held by every rank
    std::size_t whole_bytes = 0;          // the unsplit layer
};

// The plan of main layer `layer` of `config` over options.ranks ranks. Throws a usage error
// for ranks < 1, an intermediate or vocabulary unit that does not divide its dimension, an
// owner list of the wrong length or with an owner outside [0, ranks).
LayerTensorPlan plan_layer_split(const ModelConfig& config, int layer, const TensorSplitOptions& options);

// The global weights (embedding, final norm, hyper head, head) split the same way.
LayerTensorPlan plan_global_split(const ModelConfig& config, const TensorSplitOptions& options);

// Which shard of `shards` covers unit u (-1 when none does).
int rank_of_unit(const std::vector<Shard>& shards, int u);

// What the placement engine sees of N ranks: per rank, the bytes that must be resident (every
// main layer's weights but the routed experts, and the global weights; the MTP layers are not
// counted) and the bytes one resident (layer, expert) takes in that rank's slab: its shard when
// halved, the whole expert when whole.
struct RankSlabs {
    ExpertSplit experts = ExpertSplit::halved;
    std::vector<std::size_t> dense_bytes;
    std::vector<std::size_t> expert_slot_bytes;
    std::size_t model_experts = 0;  // routed (layer, expert) pairs of the main layers
};
RankSlabs plan_rank_slabs(const ModelConfig& config, const TensorSplitOptions& options);

// How many (layer, expert) pairs N slabs of slab_bytes[r] hold: halved, an expert needs its slot
// on every rank, so the smallest rank's count; whole, each rank holds its own, so the sum (which
// experts a rank owns is the placement's choice). At most the model's count.
std::size_t resident_experts(const RankSlabs& slabs, const std::vector<std::size_t>& slab_bytes);

}  // namespace aff
