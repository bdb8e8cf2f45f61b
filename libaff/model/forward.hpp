// The CPU reference forward pass of DeepSeek-V4 (model doc §3-§5.1): the executable
// specification that every GPU kernel is checked against. Plain float32, threaded over
// an aff::ThreadPool with results independent of the thread count. One entry point
// serves prefill, chunked prefill and decode: forward() runs any number of tokens at
// the sequence's next positions against the per-layer DecodeState (§4: the sliding
// ring, the compressors' pending windows, compressed entries and indexer keys), so a
// prompt fed whole, in chunks of any size, or token by token gives the same logits.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/model/route_observer.hpp"
#include "libaff/model/weights.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {

// One compressor's running state (§4.1).
struct CompressorState {
    std::vector<float> pending_kv, pending_gate;  // tokens since the last window boundary, [ratio, width]
    int pending = 0;
    std::vector<float> prev_kv, prev_gate;  // CSA: Ca / gate of the previous complete window, [ratio, dim]
    bool has_prev = false;
    std::vector<float> entries;  // emitted entries, [count, dim], normalised and rotated
    int count = 0;
};

struct LayerState {
    std::vector<float> ring;  // [W, Dh], slot = position mod W
    CompressorState compressor, indexer;
};

// Diagnostics for a test that holds another backend to this forward: the forward's discrete
// choices (the router's top-k in a layer of learned routing, the indexer's top-k) go the other
// way when two scores are nearer than the other backend's rounding differences, and a single
// flipped choice moves the logits far beyond any rounding bound. Filled by forward() when
// DecodeState::margins points here (and by mtp_forward, by MTP position, for its router): per
// position, the smallest relative margin of any choice made there, (k-th best − best left out)
// / max(|k-th best|, |best left out|). A tie of two exact zeros (the indexer's ReLU floor) is
// exact on every backend and counts as no tie.
struct SelectionMargins {
    std::vector<double> by_position;  // +inf where no choice was made
    void note(std::int64_t position, double margin);
};

// Everything a sequence carries between forward calls.
struct DecodeState {
    std::int64_t position = 0;        // next position to run
    std::vector<LayerState> layers;   // main layers
    std::vector<LayerState> mtp;      // MTP layers (their own rings)
    std::int64_t mtp_position = 0;    // next position of the MTP layer
    SelectionMargins* margins = nullptr;  // diagnostics (tests): see SelectionMargins
    RouteObserver* routes = nullptr;      // route traces: sees the main layers' routing (mtp_forward's: layer L)
    // DSpark taps: when set, forward() fills it with [n, taps, D], the mean of the residual
    // streams after each of config.dspark.tap_layers for each token run (model doc §5.2).
    std::vector<float>* taps = nullptr;
    // Diagnostics (tests/bench/route_prediction_bench.cpp): when set, sees for each main layer
    // routed by its router (not hash-routed) the experts that router would choose from the
    // layer's input before attention (its FFN collapse of the streams as they enter the layer),
    // reported before the layer runs: how well a layer's experts can be known early enough to
    // be fetched during its attention. Changes nothing computed.
    RouteObserver* predicted_routes = nullptr;
};

// The DSpark drafter's state (model doc §5.2): per stage, the sliding ring of the latent keys
// built from the trunk's context features, at slot position mod W; the rings hold the trunk
// positions [first, position).
struct DsparkState {
    std::vector<LayerState> stages;  // only their rings are used
    std::int64_t first = 0, position = 0;
    RouteObserver* routes = nullptr;  // route traces: sees dspark_block's stages as layers L + s
};

// One DSpark draft block's raw output (dspark_forward.cpp): the shared head's logits of the
// block's γ positions, before the Markov correction, and the last stage's hyper-head outputs
// before the norm (the confidence head's input).
struct DsparkBlock {
    std::vector<float> logits;  // [γ, V]
    std::vector<float> y;       // [γ, D]
};

// The part of a sub-layer one tensor-parallel rank computes (libaff/placement/tensor_split.hpp
// says why the cuts fall where they do): output groups [group_first, group_end) of the
// attention (their heads, wo_a rows and wo_b input columns); intermediate rows [inter_first,
// inter_end) of the shared expert and, when owned is null, of every routed expert (halved);
// with owned, only the routed experts e with (*owned)[e] != 0, whole. Each rank's output is a
// partial sum of the sub-layer's: the ranks' outputs summed (an all-reduce) give the whole.
// The norms, the latent, compressor, indexer and router run whole on every rank. -1: to the end.
struct SubLayerShard {
    int group_first = 0, group_end = -1;
    int inter_first = 0, inter_end = -1;
    const std::vector<char>* owned = nullptr;
};

struct ForwardOptions {
    int max_layers = -1;               // run only the first N main layers (diagnostics); -1 = all
    bool no_routed_experts = false;    // skip routed experts (diagnostics: shared expert only)
};

class Model {
public:
    Model(ModelConfig config, ModelWeights weights, ThreadPool& pool, ForwardOptions options = {});
    // Opens a checkpoint directory (libaff/checkpoint) or an .aff container file
    // (libaff/container), whichever `path` is, and loads every weight (load.cpp). A
    // container's routed experts stay in its memory map and are decoded on the fly; a
    // draft container (metadata role "draft") is rejected.
    static std::unique_ptr<Model> load(const std::string& path, ThreadPool& pool, ForwardOptions options = {});

    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    bool has_mtp() const { return !weights_.mtp.empty(); }
    bool has_dspark() const { return !weights_.dspark.stages.empty(); }

    DecodeState new_state() const;

    // Runs `tokens` at positions state.position, state.position+1, ... and advances the
    // state. Returns float32 logits [n, V] for every token when all_logits, else for the
    // last one only ([V]). When streams_out is given it receives the final residual
    // streams [n_tokens, hc_mult, D] (before the hyper head; the MTP layer's input H).
    std::vector<float> forward(DecodeState& state, std::span<const std::int32_t> tokens, bool all_logits,
                               std::vector<float>* streams_out = nullptr) const;

    // MTP draft (§5.1), first MTP layer: for each i, the trunk streams H_i of position
    // state.mtp_position + i and the token that follows it (next_tokens[i]) give logits
    // for the token after that. The MTP attention runs at the position of H_i.
    // Returns [n, V] logits, or only the last row's ([V]) when !all_logits; advances
    // state.mtp_position by n. streams_out, when given, receives the MTP layer's output
    // streams [n, hc_mult, D] (before its hyper head): the H of a further draft step.
    // state.routes sees its routing as one call of layer num_layers; state.margins its router's.
    std::vector<float> mtp_forward(DecodeState& state, std::span<const float> streams,
                                   std::span<const std::int32_t> next_tokens, bool all_logits = true,
                                   std::vector<float>* streams_out = nullptr) const;

    // DSpark (§5.2; dspark_forward.cpp). A state whose rings are empty and start at `position`.
    DsparkState new_dspark_state(std::int64_t position = 0) const;
    // Extends every stage's ring by the trunk positions state.position .. + n - 1 from their
    // taps [n, taps, D] (DecodeState::taps): ctx = main_norm(main_proj · concat), then per
    // stage kv_norm(wkv · ctx) with the main RoPE at the position, stored at position mod W.
    void dspark_extend(DsparkState& state, std::span<const float> taps) const;
    // The draft block for the anchor token at position state.position (the trunk's next):
    // ids [anchor, noise × (γ − 1)] at positions state.position .. + γ − 1 through every
    // stage (attention over the ring's positions and the whole block, no causal mask), the
    // last stage's hyper head, norm and the shared head. Leaves the state as it was.
    // state.routes sees the block as one call of layers num_layers + s, stage s, over the block's
    // γ rows: the anchor at state.position (where the trunk runs it next), then the noise
    // token at state.position + 1 .. + γ − 1 (row i's output guesses the token at position + i + 1).
    DsparkBlock dspark_block(DsparkState& state, std::int32_t anchor) const;
    // logits [V] += markov_w2 · markov_w1[prev] (§5.2 step 4).
    void dspark_markov(std::int32_t prev, std::span<float> logits) const;
    // The confidence head: sigmoid(proj · [y | markov_w1[prev]]) (§5.2 step 5; the sigmoid as
    // the paper describes it: tests/oracle/dspark_reference.md).
    float dspark_confidence(std::span<const float> y, std::int32_t prev) const;

    // One main layer's attention block (§3.4-3.8) for n tokens at positions start..: a is the
    // normalised attention input [n, D], out receives [n, D]; st is read and advanced as
    // forward() does. For backends that run the rest of the layer elsewhere (libaff/gpu runs
    // attention here until the attention kernels are wired in).
    // With a shard, out receives that rank's partial sum (SubLayerShard); st advances the same.
    void attention_block(int layer, LayerState& st, std::int64_t start, int n, const float* a, float* out,
                         const SubLayerShard& shard = {}) const;

    // One main layer's MoE (§3.9) for tokens at positions start..: b is the normalised input
    // [n, D], out receives [n, D] (a shard's partial sum with a shard). No route observer.
    void moe_block(int layer, std::span<const std::int32_t> tokens, std::int64_t start, const float* b, float* out,
                   const SubLayerShard& shard = {}) const;

private:
    struct Scratch;
    void layer_forward(const LayerWeights& w, int layer_index, AttentionKind kind, bool hash, LayerState& st,
                       std::int64_t start, std::span<const std::int32_t> tokens, std::vector<float>& x,
                       SelectionMargins* margins, RouteObserver* routes, std::int64_t block_ring_first = -1,
                       RouteObserver* predicted = nullptr) const;
    // The router's choice (§3.9) for n tokens' normalised inputs b [n, D]: chosen and gates
    // [n, k]; keys [n, E] (selection keys) when not null and the layer is not hash-routed.
    void router_choice(const FfnWeights& w, bool hash, std::span<const std::int32_t> tokens, const float* b,
                       std::vector<std::int32_t>& chosen, std::vector<float>& gates, float* keys) const;
    // block_ring_first >= 0: a DSpark draft block (attend_block from that ring position; the
    // ring is not written).
    void attention(const LayerWeights& w, AttentionKind kind, LayerState& st, std::int64_t start, int n,
                   const float* a, float* out, SelectionMargins* margins, const SubLayerShard& shard,
                   std::int64_t block_ring_first = -1) const;
    void compress(const CompressorWeights& w, CompressorState& st, std::int64_t start, int n, const float* a) const;
    void moe(const FfnWeights& w, int layer_index, bool hash, std::span<const std::int32_t> tokens, const float* b,
             float* out, std::int64_t start, SelectionMargins* margins, RouteObserver* routes,
             const SubLayerShard& shard) const;
    void hyper_head(const HyperHeadWeights& hc, const float* x, int n, float* y) const;
    void norm_head_logits(const std::vector<float>& norm, float* y, int n, float* logits) const;
    void hyper_head_logits(const HyperHeadWeights& hc, const std::vector<float>& norm, const float* x, int n,
                           float* logits) const;
    LayerState layer_state(const LayerWeights& w) const;

    ModelConfig config_;
    ModelWeights weights_;
    ThreadPool& pool_;
    ForwardOptions options_;
    std::vector<float> inv_freq_main_, inv_freq_compress_;  // [Dr/2]
};

// RoPE inverse frequencies of one table (plain, or YaRN-blended: model doc §3.3).
std::vector<float> rope_inv_freq(const RopeParameters& rope, int rope_dim);

}  // namespace aff
