// The tensor-parallel plan of a layer (see tensor_split.hpp): the weights of the model doc's
// §2.2-2.3 tables, each with its cut, in the order the forward uses them.
#include "libaff/placement/tensor_split.hpp"

#include "libaff/core/error.hpp"

#include <algorithm>
#include <cstdint>

namespace aff {

std::vector<Shard> split_units(int units, int ranks) {
    if (ranks < 1) throw_usage("a tensor split needs at least one rank, not " + std::to_string(ranks));
    if (units < 0) throw_usage("a tensor split of " + std::to_string(units) + " units");
    std::vector<Shard> out(ranks);
    int first = 0;
    for (int r = 0; r < ranks; ++r) {
        out[r] = {first, units / ranks + (r < units % ranks ? 1 : 0)};
        first += out[r].count;
    }
    return out;
}

int rank_of_unit(const std::vector<Shard>& shards, int u) {
    for (std::size_t r = 0; r < shards.size(); ++r)
        if (u >= shards[r].first && u < shards[r].end()) return int(r);
    return -1;
}

std::size_t slab_bytes(Storage s, std::size_t rows, std::size_t cols) {
    auto ceil_div = [](std::size_t a, std::size_t b) { return (a + b - 1) / b; };
    switch (s) {
    case Storage::f32: return rows * cols * 4;
    case Storage::bf16: return rows * cols * 2;
    case Storage::i64: return rows * cols * 8;
    case Storage::fp8_block128: return rows * cols + ceil_div(rows, 128) * ceil_div(cols, 128);
    case Storage::fp4_group32: return rows * ceil_div(cols, 2) + rows * ceil_div(cols, 32);
    }
    throw_internal("slab_bytes: unknown storage");
}

namespace {

// Builds the weight list of one plan and totals its bytes.
class PlanBuilder {
public:
    PlanBuilder(LayerTensorPlan& plan, bool checkpoint_storage) : plan_(plan), checkpoint_(checkpoint_storage) {}

    void replicated(std::string name, SubLayer sub, Storage s, std::size_t rows, std::size_t cols) {
        WeightSplit w = base(std::move(name), sub, s, rows, cols, 1);
        w.rank_bytes.assign(plan_.ranks, w.whole_bytes);
        add(std::move(w));
    }
    // A shard of `unit` output rows (column) or input columns (row) per shard unit, `copies` times.
    void split(std::string name, SubLayer sub, SplitKind kind, Storage s, std::size_t rows, std::size_t cols,
               std::size_t unit, const std::vector<Shard>& shards, std::size_t copies = 1) {
        WeightSplit w = base(std::move(name), sub, s, rows, cols, copies);
        w.kind = kind;
        w.unit = unit;
        w.shards = shards;
        for (const Shard& sh : shards) {
            const std::size_t part = sh.count * unit;
            w.rank_bytes.push_back(copies * (kind == SplitKind::column ? slab_bytes(w.storage, part, cols)
                                                                       : slab_bytes(w.storage, rows, part)));
        }
        add(std::move(w));
    }
    // Routed experts whole: each rank holds the experts it owns.
    void by_owner(std::string name, Storage s, std::size_t rows, std::size_t cols, const std::vector<int>& owner) {
        WeightSplit w = base(std::move(name), SubLayer::moe, s, rows, cols, owner.size());
        w.kind = SplitKind::by_expert;
        w.rank_bytes.assign(plan_.ranks, 0);
        for (int r : owner) w.rank_bytes[r] += slab_bytes(w.storage, rows, cols);
        add(std::move(w));
    }

private:
    WeightSplit base(std::string name, SubLayer sub, Storage s, std::size_t rows, std::size_t cols,
                     std::size_t copies) const {
        WeightSplit w;
        w.name = std::move(name);
        w.sub_layer = sub;
        w.storage = checkpoint_ ? s : Storage::f32;
        w.rows = rows;
        w.cols = cols;
        w.copies = copies;
        w.whole_bytes = copies * slab_bytes(w.storage, rows, cols);
        return w;
    }
    void add(WeightSplit w) {
        if (plan_.rank_bytes.empty()) plan_.rank_bytes.assign(plan_.ranks, 0);
        for (int r = 0; r < plan_.ranks; ++r) plan_.rank_bytes[r] += w.rank_bytes[r];
        if (w.kind == SplitKind::replicated) plan_.replicated_bytes += w.whole_bytes;
        plan_.whole_bytes += w.whole_bytes;
        plan_.weights.push_back(std::move(w));
    }

    LayerTensorPlan& plan_;
    bool checkpoint_;
};

void check_unit(int dim, int unit, const char* what) {
    if (unit < 1 || dim % unit != 0)
        throw_usage(std::string("the ") + what + " split unit " + std::to_string(unit) + " does not divide " +
                    std::to_string(dim));
}

}  // namespace

LayerTensorPlan plan_layer_split(const ModelConfig& c, int layer, const TensorSplitOptions& o) {
    if (layer < 0 || layer >= c.num_layers)
        throw_usage("layer " + std::to_string(layer) + " is outside the model's " + std::to_string(c.num_layers));
    if (c.o_groups < 1 || c.num_heads % c.o_groups != 0)
        throw_usage("a tensor split needs the heads in whole output groups");
    check_unit(c.moe_intermediate_size, o.intermediate_unit, "intermediate");
    LayerTensorPlan p;
    p.ranks = o.ranks;
    p.experts = o.experts;
    p.groups = split_units(c.o_groups, o.ranks);
    p.intermediate = split_units(c.moe_intermediate_size / o.intermediate_unit, o.ranks);
    p.intermediate_unit = o.intermediate_unit;
    const int E = c.n_routed_experts;
    if (o.experts == ExpertSplit::whole) {
        if (o.expert_owner.empty()) {
            for (int e = 0; e < E; ++e) p.expert_owner.push_back(e % o.ranks);
        } else {
            if (int(o.expert_owner.size()) != E)
                throw_usage("the expert owners name " + std::to_string(o.expert_owner.size()) + " experts, the layer has " +
                            std::to_string(E));
            for (int r : o.expert_owner)
                if (r < 0 || r >= o.ranks)
                    throw_usage("expert owner rank " + std::to_string(r) + " is outside [0, " + std::to_string(o.ranks) + ")");
            p.expert_owner = o.expert_owner;
        }
    }

    const std::size_t D = c.hidden_size, H = c.num_heads, Dh = c.head_dim, Rq = c.q_lora_rank, G = c.o_groups,
                      Ro = c.o_lora_rank, I = c.moe_intermediate_size, nD = std::size_t(c.hc_mult) * D,
                      M = c.mix_width(), Hi = c.index_heads, Di = c.index_head_dim;
    PlanBuilder b(p, o.checkpoint_storage);
    const auto A = SubLayer::attention, F = SubLayer::moe;
    auto hyper = [&](const std::string& site, SubLayer sub) {
        b.replicated("hc_" + site + "_fn", sub, Storage::f32, M, nD);
        b.replicated("hc_" + site + "_base", sub, Storage::f32, 1, M);
        b.replicated("hc_" + site + "_scale", sub, Storage::f32, 1, 3);
    };
    auto compressor = [&](const std::string& prefix, std::size_t dim, bool overlap, int ratio) {
        const std::size_t width = (overlap ? 2 : 1) * dim;
        b.replicated(prefix + ".wkv", A, Storage::bf16, width, D);
        b.replicated(prefix + ".wgate", A, Storage::bf16, width, D);
        b.replicated(prefix + ".ape", A, Storage::f32, std::size_t(ratio), width);
        b.replicated(prefix + ".norm", A, Storage::bf16, 1, dim);
    };

    hyper("attn", A);
    b.replicated("attn_norm", A, Storage::bf16, 1, D);
    b.split("attn.attn_sink", A, SplitKind::column, Storage::f32, H, 1, H / G, p.groups);
    b.replicated("attn.wq_a", A, Storage::fp8_block128, Rq, D);
    b.replicated("attn.q_norm", A, Storage::bf16, 1, Rq);
    b.split("attn.wq_b", A, SplitKind::column, Storage::fp8_block128, H * Dh, Rq, H / G * Dh, p.groups);
    b.replicated("attn.wkv", A, Storage::fp8_block128, Dh, D);
    b.replicated("attn.kv_norm", A, Storage::bf16, 1, Dh);
    const AttentionKind kind = c.attention[layer];
    if (kind != AttentionKind::sliding) compressor("attn.compressor", Dh, kind == AttentionKind::csa, c.compress_ratio[layer]);
    if (kind == AttentionKind::csa) {
        b.replicated("attn.indexer.wq_b", A, Storage::fp8_block128, Hi * Di, Rq);
        b.replicated("attn.indexer.weights_proj", A, Storage::bf16, Hi, D);
        compressor("attn.indexer.compressor", Di, true, c.compress_ratio[layer]);
    }
    b.split("attn.wo_a", A, SplitKind::column, Storage::fp8_block128, G * Ro, H * Dh / G, Ro, p.groups);
    b.split("attn.wo_b", A, SplitKind::row, Storage::fp8_block128, D, G * Ro, Ro, p.groups);
    p.collectives.push_back({"attn.wo_b", false, D});

    hyper("ffn", F);
    b.replicated("ffn_norm", F, Storage::bf16, 1, D);
    b.replicated("ffn.gate.weight", F, Storage::bf16, std::size_t(E), D);
    if (c.hash_routed[layer])
        b.replicated("ffn.gate.tid2eid", F, Storage::i64, std::size_t(c.vocab_size), std::size_t(c.experts_per_token));
    else
        b.replicated("ffn.gate.bias", F, Storage::f32, 1, std::size_t(E));
    const std::size_t iu = std::size_t(o.intermediate_unit);
    if (c.n_shared_experts > 0) {
        b.split("ffn.shared_experts.w1", F, SplitKind::column, Storage::fp8_block128, I, D, iu, p.intermediate);
        b.split("ffn.shared_experts.w3", F, SplitKind::column, Storage::fp8_block128, I, D, iu, p.intermediate);
        b.split("ffn.shared_experts.w2", F, SplitKind::row, Storage::fp8_block128, D, I, iu, p.intermediate);
    }
    if (o.experts == ExpertSplit::halved) {
        b.split("ffn.experts.w1", F, SplitKind::column, Storage::fp4_group32, I, D, iu, p.intermediate, E);
        b.split("ffn.experts.w3", F, SplitKind::column, Storage::fp4_group32, I, D, iu, p.intermediate, E);
        b.split("ffn.experts.w2", F, SplitKind::row, Storage::fp4_group32, D, I, iu, p.intermediate, E);
    } else {
        b.by_owner("ffn.experts.w1", Storage::fp4_group32, I, D, p.expert_owner);
        b.by_owner("ffn.experts.w3", Storage::fp4_group32, I, D, p.expert_owner);
        b.by_owner("ffn.experts.w2", Storage::fp4_group32, D, I, p.expert_owner);
    }
    p.collectives.push_back({"ffn (routed experts + shared_experts.w2)", false, D});
    return p;
}

LayerTensorPlan plan_global_split(const ModelConfig& c, const TensorSplitOptions& o) {
    check_unit(c.vocab_size, o.vocab_unit, "vocabulary");
    LayerTensorPlan p;
    p.ranks = o.ranks;
    p.experts = o.experts;
    const std::vector<Shard> vocab = split_units(c.vocab_size / o.vocab_unit, o.ranks);
    const std::size_t D = c.hidden_size, V = c.vocab_size, n = c.hc_mult, vu = o.vocab_unit;
    PlanBuilder b(p, o.checkpoint_storage);
    b.split("embed.weight", SubLayer::embedding, SplitKind::column, Storage::bf16, V, D, vu, vocab);
    p.collectives.push_back({"embed.weight", false, D});
    b.replicated("hc_head_fn", SubLayer::head, Storage::f32, n, n * D);
    b.replicated("hc_head_base", SubLayer::head, Storage::f32, 1, n);
    b.replicated("hc_head_scale", SubLayer::head, Storage::f32, 1, 1);
    b.replicated("norm.weight", SubLayer::head, Storage::bf16, 1, D);
    b.split("head.weight", SubLayer::head, SplitKind::column, Storage::bf16, V, D, vu, vocab);
    p.collectives.push_back({"head.weight", true, V});
    return p;
}

RankSlabs plan_rank_slabs(const ModelConfig& c, const TensorSplitOptions& o) {
    RankSlabs s;
    s.experts = o.experts;
    s.dense_bytes = plan_global_split(c, o).rank_bytes;
    s.expert_slot_bytes.assign(o.ranks, 0);
    s.model_experts = std::size_t(c.num_layers) * std::size_t(c.n_routed_experts);
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerTensorPlan p = plan_layer_split(c, l, o);
        std::vector<std::size_t> expert_bytes(o.ranks, 0);
        std::size_t slot = 0;
        for (const WeightSplit& w : p.weights)
            if (w.name.rfind("ffn.experts.", 0) == 0) {
                for (int r = 0; r < o.ranks; ++r) expert_bytes[r] += w.rank_bytes[r];
                slot += w.whole_bytes / w.copies;
            }
        for (int r = 0; r < o.ranks; ++r) {
            s.dense_bytes[r] += p.rank_bytes[r] - expert_bytes[r];
            // Every layer's experts have one shape, so the last layer's slot stands for all.
            s.expert_slot_bytes[r] = o.experts == ExpertSplit::whole ? slot : expert_bytes[r] / std::size_t(c.n_routed_experts);
        }
    }
    return s;
}

std::size_t resident_experts(const RankSlabs& s, const std::vector<std::size_t>& slab_bytes) {
    if (slab_bytes.size() != s.expert_slot_bytes.size())
        throw_usage("slab sizes for " + std::to_string(slab_bytes.size()) + " ranks, the split has " +
                    std::to_string(s.expert_slot_bytes.size()));
    std::size_t total = 0, fewest = SIZE_MAX;
    for (std::size_t r = 0; r < slab_bytes.size(); ++r) {
        // A rank with no share of the experts (more ranks than intermediate units) never limits.
        const std::size_t n = s.expert_slot_bytes[r] == 0 ? SIZE_MAX : slab_bytes[r] / s.expert_slot_bytes[r];
        fewest = std::min(fewest, n);
        if (n != SIZE_MAX) total += n;
    }
    return std::min(s.model_experts, s.experts == ExpertSplit::whole ? total : fewest);
}

}  // namespace aff
