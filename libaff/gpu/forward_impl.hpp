// Private to the GPU forward (libaff/gpu/forward_*.cpp): GpuModel::Impl, one part of the
// model on one device. It is made of parts, each in its own file: the weight plan
// (weight_refs.hpp) and arena (weight_arena.hpp), the routed experts and their table
// (expert_store.hpp), the activations (activations.hpp), the captured decode steps
// (decode_graphs.hpp) and the step profile's marks (step_marks.hpp); what is left here is the
// decode state layout and the stages of a call, split over the files named below. Not a
// public header: nothing outside libaff/gpu/ includes it.
#pragma once

#include "libaff/gpu/activations.hpp"
#include "libaff/gpu/decode_graphs.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/expert_store.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/gpu/route_ring.hpp"
#include "libaff/gpu/step_marks.hpp"
#include "libaff/gpu/weight_arena.hpp"
#include "libaff/gpu/weight_refs.hpp"
#include "libaff/model/forward.hpp"
#include "kernels/compressor.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/expert_stage.hpp"
#include "kernels/hc.hpp"
#include "kernels/router_topk.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aff {
class TensorReader;
}

namespace aff::gpu {

namespace fwd {

inline constexpr std::size_t kRuntimeReserve = 256u << 20;  // left free for the runtime and kernels' own needs

// Layers a call runs: the model's, or the first max_layers (set_max_layers, diagnostics).
inline int layers_run(const ForwardOptions& o, const ModelConfig& c) {
    return o.max_layers < 0 ? c.num_layers : std::min(o.max_layers, c.num_layers);
}

// A list of state stretches being built (snapshot_ranges, rewind_ranges): a stretch of the
// same part that starts within an alignment of the previous one's end joins it (one copy,
// the padding between them included).
struct StateRangeList {
    std::vector<StateRange> ranges;
    int part = 0;  // of the stretches added next
    void add(std::size_t offset, std::size_t bytes) {
        if (bytes == 0) return;
        if (!ranges.empty() && ranges.back().part == part) {
            StateRange& last = ranges.back();
            const std::size_t end = last.offset + last.bytes;
            if (offset >= end && offset - end < kAlign) {
                last.bytes = offset + bytes - last.offset;
                return;
            }
        }
        ranges.push_back({offset, bytes, part});
    }
};

// A compressor's pending windows and, for CSA's overlapping windows, the previous one: what
// a state reads of it at any position besides the entries (kernels/compressor.hpp).
inline void add_compressor_windows(StateRangeList& list, const CompressorRefs& w, const CompressorStateRefs& st) {
    const std::size_t width = std::size_t(w.overlap ? 2 : 1) * w.dim;
    list.add(st.pending_kv, std::size_t(w.ratio) * width * 4);
    list.add(st.pending_gate, std::size_t(w.ratio) * width * 4);
    if (w.overlap) {
        list.add(st.prev_kv, std::size_t(w.ratio) * w.dim * 4);
        list.add(st.prev_gate, std::size_t(w.ratio) * w.dim * 4);
    }
}

// A uniform draw in [0, 1) as the device's float: a double just under 1 must not round up to 1
// (the draw kernels take u < 1). The sampled chains' draws and forward_ids' go through here.
inline float device_draw(double u) { return std::min(float(u), std::nextafter(1.0f, 0.0f)); }

}  // namespace fwd

using fwd::AttentionRefs;
using fwd::CompressorRefs;
using fwd::CompressorStateRefs;
using fwd::DenseRef;
using fwd::LayerRefs;
using fwd::LayerStateRefs;
using fwd::Linear;
using fwd::Seq;
using fwd::Upload;

// Where each stage lives: the weights' plan (forward_weights.cpp), the state layout, the
// memory check, the upload and describe() (forward_model.cpp), one linear map
// (forward_linear.cpp), the attention block (forward_attention.cpp), the MoE block
// (forward_moe.cpp), the layer loop with mHC, norms and head (forward_layers.cpp), the calls:
// forward, decode with its captured graphs, the step profile (forward_decode.cpp), the expert
// table's door (forward_experts.cpp) and snapshots (forward_snapshot.cpp); the draft layers:
// the MTP layer (forward_mtp.cpp) and DSpark's stages (forward_dspark.cpp).
//
// One Impl is one part of the model on one device: layers first_layer .. end_layer-1 (every
// layer on one GPU), the embedding when first_layer is 0, the hyper head, final norm and head
// when end_layer is the last. Layer-indexed members (layers, state_refs, layer_dense_bytes)
// keep the model's layer numbers; those of other parts stay empty. The arena, the experts and
// the activations are bases (their members are the stages' vocabulary: at<T>(), x, g1, ...).
struct GpuModel::Impl : fwd::WeightArena, fwd::ExpertStore, fwd::Activations {
    const Model& cpu;
    const ModelConfig& c;
    GpuOptions options;
    int device = 0;
    int first_layer = 0, end_layer = 0;
    struct DeviceGuard {
        explicit DeviceGuard(int device) { use_device(device); }
    } device_guard;  // before the stream: it belongs to the chosen device
    // What the layer split weighs (plan_weights, plan_state): the arena bytes of the embedding,
    // of the head with its norms, of what every part holds (codebook, expert table, RoPE
    // table), and of each layer's weights and one sequence's state of it.
    std::size_t embed_bytes = 0, head_bytes = 0, common_bytes = 0;
    std::vector<std::size_t> layer_bytes;
    Stream stream;
    Event done;  // recorded when this part's work of a call is queued, for the next part to wait on

    DenseRef embed, head;
    std::size_t norm = 0, hc_head_fn = 0, hc_head_base = 0, hc_head_scale = 0;
    // layers[num_layers] (and state_refs[num_layers], its ring at offset 0 of the MTP state's
    // buffer) is the MTP layer's when has_mtp; its own weights besides the layer are these.
    std::vector<LayerRefs> layers;
    bool has_mtp = false;
    std::string mtp_why_not;
    struct MtpRefs {
        Linear e_proj, h_proj;
        std::size_t enorm = 0, hnorm = 0, norm = 0, hc_head_fn = 0, hc_head_base = 0, hc_head_scale = 0;
        // The MTP state's buffer: ring [W, Dh], saved ring, store [W][hc, D], last output [hc, D].
        std::size_t ring = 0, saved = 0, store = 0, out = 0, ids = 0, bytes = 0;  // ids: a greedy chain's [W]
        std::size_t identity = 0;  // post = 1, comb = I for kScratchTokens rows: hc_post as "add e to every stream"
    } mtp;
    // layers[num_layers + s] (and state_refs[num_layers + s], its ring in the DSpark state's
    // buffer) is DSpark stage s's when has_dspark; its own weights besides the stages are these.
    bool has_dspark = false;
    std::string dspark_why_not;
    struct DsparkRefs {
        int stages = 0;
        Linear main_proj;
        std::size_t main_norm = 0, norm = 0, hc_head_fn = 0, hc_head_base = 0, hc_head_scale = 0;
        DenseRef markov_w2;  // [V, r]: the r → V projection of markov_w1[prev]
        DenseRef markov_w1;  // [V, r]: the rows gathered on the device by a greedy chain (dspark_greedy)
        DenseRef confidence;  // [1, D + r]: the confidence head's proj
        std::size_t ones = 0;  // {1, 1}: hc_post's post and comb for one stream, "add f to x"
        // The DSpark state's buffer: the rings, the ring fill's scratch (kDsparkChunk positions
        // a pass: taps, ctx, kv), the block's logits [γ, V] and y [γ, D], the Markov row's
        // input [r], correction [V] and result [V].
        std::vector<std::size_t> rings;
        // A greedy chain's: ids [γ + 1] (the anchor, then the guesses: guess i's prev is ids[i]),
        // the confidence head's input [D + r] (y_i, then markov_w1[prev], the Markov input) and z [γ].
        std::size_t taps = 0, ctx = 0, kv = 0, logits = 0, y = 0, w1 = 0, correction = 0, row = 0, ids = 0, conf_in = 0,
                    z = 0, bytes = 0;
    } dspark;
    static constexpr int kDsparkChunk = 64;  // ring-fill positions a pass (at most kScratchTokens)
    // While a draft block runs its stages: the first ring position its attention sees
    // (attention_gpu takes the kernel's block mode and stores nothing in the ring); -1 else.
    std::int64_t block_ring_first = -1;
    std::vector<std::size_t> layer_dense_bytes;  // every weight of a layer but its routed experts
    // DSpark taps (forward_taps.cpp; GpuModel::set_taps): while taps_on, run() copies the
    // streams after each tap layer, expanded, into taps_dev [tap][taps_rows][hc, D].
    bool taps_on = false;
    Buffer taps_dev;
    // A sampled chain's draws and q rows ([k] then [k, V] floats; mtp_draft_sampled,
    // dspark_sampled), grown on first use: a few MiB outside the memory plan. The last chain's
    // q rows stay there until the next chain (a verify call reads them: RowDraws).
    Buffer chain_draws;
    const float* last_chain_q = nullptr;
    std::size_t last_chain_rows = 0;
    // A drawn pick's uniforms and any host q rows it brings (forward_ids with RowDraws).
    Buffer pick_draws;
    int taps_rows = 0;
    // finish_call's drawn picks (RowDraws): speculative_rows over the `rows` logits rows into
    // logit_ids, the draws (floats) staged in `host`, alive until the call's wait.
    void draw_picks(const RowDraws& draws, int rows, int candidates, std::vector<float>& host);
    // Room for `rows` rows a tap (before a call's launches: a captured graph must not see it move).
    void ensure_taps(int rows);
    // After layer l of a call of n rows: its streams into taps_dev when l is a tap layer.
    void tap_after(int l, int n, bool pending);
    int fp8_linears = 0, dense_linears = 0;

    // Attention on the GPU: whether the kernels take this geometry (why not, if not), the RoPE
    // tables (host, for the rope kernel; device, for the compressor), the per-sequence state.
    bool attention_on_gpu = false;
    std::string attention_why_cpu;
    std::vector<float> inv_freq_main, inv_freq_compress;
    std::size_t inv_freq_compress_dev = 0;
    int max_context = 0;
    std::vector<LayerStateRefs> state_refs;
    std::size_t state_bytes = 0;
    int scores_stride = 1;

    fwd::DecodeGraphs graphs;  // dropped when the activations move or the layer count changes
    fwd::RouteRing routes;     // the last drained call's routing (route_ring.hpp)
    fwd::LayerRoutes mtp_routes;  // the MTP layer's, of the last mtp_forward a route observer saw
    std::vector<fwd::LayerRoutes> dspark_routes;  // DSpark's stages', of the last dspark_block observed
    fwd::StepMarks steps;      // GpuModel::profile_decode
    void mark(const char* what) { steps.mark(what, stream); }

    // Prefill calls (one sequence) of at least gemm_min_tokens tokens take the prefill GEMMs
    // (fp8_gemm, bf16_gemm, moe_gemm) where the shape allows; decode steps (of any number of
    // sequences) and shorter calls stay on the GEMVs, which keep fp32 activations.
    bool prefill_call = false;  // set by run()
    bool gemv_calls = false;    // GpuModel::set_gemv_calls: every call on the GEMVs
    bool use_gemm(int n) const {
        return !options.exact && !gemv_calls && prefill_call && options.gemm_min_tokens > 0 &&
               n >= options.gemm_min_tokens;
    }

    Impl(const Model& m, const GpuOptions& o, int dev, int first, int end)
        : cpu(m), c(m.config()), options(o), device(dev), first_layer(first), end_layer(end), device_guard(dev) {}

    // Where attention runs, the weights' and state's plans (nothing allocated yet).
    void prepare(const TensorReader* weights);
    // Checks the plan against this device's free memory now (and the cap), then allocates
    // and uploads; tiered, plans and fills the expert tiers first (allocate_tiers).
    void allocate();
    // This device's free memory less the runtime's reserve, capped by --gpu-mib.
    std::size_t available_bytes() const;
    void allocate_tiers(const MemoryInfo& mem);
    // The SSD tier (ssd_tier.cpp; ssd_tier.hpp says how a layer's SSD experts are staged).
    const TensorReader* weights_src = nullptr;  // what prepare() was given (the container's path)
    void setup_ssd();
    void read_ahead_ssd(std::span<const std::int32_t> toks);  // at a call's start: the hash layers'
    void stage_ssd(int l, int n);                              // after layer l's router
    void stage_keys(std::span<const placement::ExpertKey> keys, bool drained);
    std::vector<placement::ExpertKey> ssd_keys(int l, std::span<const std::int32_t> ids) const;
    std::vector<placement::ExpertKey> hash_ssd_keys(int l) const;
    void read_into_slot(placement::ExpertKey key, std::uint32_t slot);
    void wait_slot(std::uint32_t slot);
    void point_entries(std::span<const std::pair<placement::ExpertKey, const std::uint8_t*>> entries);
    // The mover: an SSD expert's bytes in a staging slot (read if they are not there), host side.
    const std::uint8_t* staged_bytes(placement::ExpertKey key);
    void promote_from_ssd(const placement::Admission& a, placement::Tier victim_to);  // forward_tiers.cpp
    // The mover (forward_tiers.cpp): after a call of n tokens (whose launches are all done
    // and whose route ring was drained), the call's routing to the placement engine and its
    // admissions carried out.
    void move_experts(int n);

    // The layers this part runs in a call (set_max_layers counts over the whole model).
    int run_end() const { return std::min(fwd::layers_run(options.forward, c), end_layer); }
    // This part's state buffer in a sequence's state (GpuDecodeState::device or next_devices).
    int index = 0;  // which part: 0 on one GPU
    const Buffer* state_of(const GpuDecodeState& st) const {
        if (index == 0) return &st.device;
        return std::size_t(index) <= st.next_devices.size() ? &st.next_devices[index - 1] : nullptr;
    }
    // Whether `st` has this part's state buffer at this model's size (a state of this model).
    bool holds(const GpuDecodeState& st) const {
        const Buffer* b = state_of(st);
        return b && b->size() >= state_bytes;
    }

    DenseRef put_dense(const Matrix& m, std::size_t& counter);

    // FP8 stays FP8 when the model file (checkpoint or container) stores it so (E4M3 + E8M0
    // scales) and fp8_gemv takes the shape; `row_block` is the row granularity the caller
    // slices the matrix at.
    Linear put_linear(const Matrix& m, const std::string& name, const TensorReader* ck, int row_block = 0);

    // Whether the attention kernels take this model's geometry (their headers state the limits).
    void decide_attention();

    CompressorRefs put_compressor(const CompressorWeights& w, const std::string& p, const TensorReader* ck);

    AttentionRefs put_attention(const AttentionWeights& w, const std::string& p, const TensorReader* ck);

    // The per-sequence state: ring [W, Dh] and each compressor's pending window, previous
    // window (CSA) and entries for max_context tokens.
    void plan_state();

    void plan_weights(const TensorReader* ck);

    // What the activations' list depends on besides the token count.
    fwd::ActivationShape activation_shape() const;
    // Room for `tokens` rows of activations (dropping the captured graphs when they move).
    void ensure_scratch(int tokens);

    // Before this part's launches of a call: room for the call's rows, its tokens (and, with
    // attention on the GPU, their positions) on this device, and the residual stream from
    // `previous`, the part before (null for the first), with its pending expand.
    void start_part(Impl* previous, std::span<const std::int32_t> tokens,
                    std::span<const std::int32_t> positions, bool pending);

    // y rows (ldy apart) = W[row0 .. row0+rows) · x rows (ldx apart), batch rows.
    void apply(const Linear& l, const float* xin, int ldx, int batch, float* yout, int ldy, int row0 = 0,
               int rows = -1, void* on_stream = nullptr);  // on_stream null: the model's stream
    // apply(l0, ...y0) and apply(l1, ...y1) over the same x: one fp8_gemv_multi launch a 4 rows
    // of x when both are FP8 GEMV calls of the same width (same results), else the two applies.
    void apply_pair(const Linear& l0, float* y0, int ldy0, const Linear& l1, float* y1, int ldy1, const float* xin,
                    int ldx, int batch);

    // y rows = W x rows for a dense BF16/F32 matrix: bf16_gemv (4 rows of x a launch) where it
    // takes the call, else dense_gemv.
    void dense_rows(const void* w, DenseType type, int rows, int cols, const float* xin, int ldx, int batch,
                    float* yout, int ldy, void* on_stream = nullptr);

    HcConfig hc_config() const;

    // One compressor step (§3.5, Model::compress): the two projections of all n rows, and the
    // kernel's arguments for each sequence on its own state, added to `steps` (the caller
    // launches the layer's compressors for every sequence at once through compressor_batch).
    void run_compressor(const CompressorRefs& w, const CompressorStateRefs& st, std::span<const Seq> seqs, int n,
                        float* kv_buf, float* gate_buf, std::vector<CompressorArgs>& steps);

    // Entries of a compressor a launch may see: those the chunk completes (start known), or
    // the state's capacity (start read on the device: the kernels keep to the visible ones).
    static int entry_bound(const Seq& q, int ratio, int capacity);

    // §3.4-3.8 on the GPU (Model::attention step by step): a [n, D] → f [n, D]. Projections,
    // norms and RoPE run over all n rows at once (positions[] holds each row's position); the
    // compressors, the indexer's scores and top-k, attention and the ring take every sequence
    // (each its own state) in one launch each.
    void attention_gpu(int l, std::span<const Seq> seqs, int n);

    // Routed experts through moe_gemv_routed (codebook-stored): the kernel reads the chosen
    // ids on the device and each expert's extent through the expert table, decodes every
    // distinct expert once for the tokens that chose it, and runs w1 and w3 in one launch; up
    // to kMoeGemvMaxBatch tokens a launch. A TQ2875R matrix (stored as W Hᵀ) takes the rotated
    // input H x: when any expert of the layer's w1/w3 is rotated, the layer's input is rotated
    // once per token and w1 and w3 run as two launches (their flags differ per expert), and
    // when any of its w2 are, each pair's SwiGLU row; the kernel picks the rotated input for a
    // flagged expert (per-expert flags on the device).
    void routed_codebook(const LayerRefs& r, int n);

    // One layer l (Model::layer_forward): mHC around attention and MoE with their norms, on
    // the n rows in x; `pending` as run()'s; returns whether an expand is left pending.
    bool run_layer(int l, std::span<const Seq> seqs, int n, bool pending, GpuDecodeState* cpu_state);
    // The last expand when pending, the hyper head `w`, the norm norm_w and the head: logits of
    // rows first .. n-1 of x.
    void run_head(int n, int first, bool pending, std::size_t fn, std::size_t base, std::size_t scale,
                  std::size_t norm_w);
    // Plans one layer's weights (attention, norms, mHC, router, shared and routed experts) under
    // `prefix` ("layers.3." or "mtp.0.") as layer l.
    LayerRefs put_layer(const LayerWeights& lw, const std::string& prefix, int l, bool hash, const TensorReader* ck);
    // The MTP layer's weights and its state's layout (forward_mtp.cpp), when it can run here.
    void plan_mtp(const TensorReader* ck);
    // One MTP call of n rows on the tokens already in tokens_dev (mtp_forward, mtp_draft_greedy):
    // everything up to the logits of its last row (or all rows) in `logits` and the last row's
    // streams kept for a chained call; queued, mtp_position not advanced. pos [n]: host room
    // for the positions' upload, which must stay alive until the stream is waited on.
    void mtp_step(GpuDecodeState& mst, int n, MtpInput from, bool all_logits, std::int32_t* pos);
    // DSpark's stages and heads and its state's layout (forward_dspark.cpp), when they can run here.
    void plan_dspark(const TensorReader* ck);

    // Runs this part's layers (and the embedding, the head where it has them) on rows
    // first.. of n; `pending` says whether the previous part left an expand pending in f,
    // post and comb (decode-sized calls), and the result whether this one does.
    bool run(std::span<const Seq> seqs, int n, int first, GpuDecodeState* cpu_state, bool pending = false);

    // Hands the residual stream to `next` (the part after this one, maybe on another device):
    // x, and f, post, comb while an expand is pending. Queued on next's stream after this
    // part's work; `next`'s device must be current.
    void hand_over(Impl& next, int n, bool pending);

    // The checks of every call: token ids in the vocabulary, the state this model's, room left.
    void check_call(const GpuDecodeState& st, std::span<const std::int32_t> toks) const;

    // Routed experts through moe_gemm (prefill): jobs grouped by expert on the device, no sync.
    void routed_codebook_gemm(const LayerRefs& r, int n);
    // Tiered: after moe_group, the bus-read experts of the call copied into the activations'
    // staging slots (GpuOptions::prefill_staging, kernels/expert_stage.hpp); returns the table
    // the GEMMs read (the per-call copy, or `table` itself).
    const std::uint8_t* const* stage_bus_experts(const std::uint8_t* const* table, int n);

    // §3.9 (Model::moe): b [n, D] → f [n, D].
    void moe(const LayerRefs& r, int n);
    // The decode prefetch (forward_prefetch.cpp; GpuTierOptions::prefetch_experts): right after
    // main layer l's attention site, on the tiers' prefetch stream, that layer's routing
    // predicted from the streams entering it and the best predicted pooled experts copied into
    // the stage slots; moe() waits for it before the routed experts and reads the per-call table
    // (prefetch_table, null where nothing was queued: not this call or layer).
    void prefetch_predicted(int l, int n);
    const std::uint8_t* const* prefetch_table = nullptr;  // set for the layer running, else null
    // What both stagings of bus-read experts pass expert_stage (the prefill GEMMs' and the
    // decode prefetch's): `table` and the per-call one, the bus ranges (the pool's, the SSD
    // staging slots'), the activations' slots and an extent's bytes; counts, min_jobs,
    // slot_count and counters are the caller's. Tiered models only.
    ExpertStageArgs stage_args(const std::uint8_t* const* table) const;
    // The router's configuration (moe() and the prefetch's prediction).
    RouterConfig router_config() const;
    // The route ring's rows for main layer r's routing in a call of n tokens (none for the MTP
    // layer or a layer outside `layers`: mtp_forward drains the MTP layer's routing into
    // mtp_routes itself); the router writes them (forward_routes.cpp).
    RouterCopy ring_slot(const LayerRefs& r, int n);
    // After a call of n tokens, before its wait: queues the ring's copy to `routes`.
    void drain_routes(int n) { routes.drain(c, route_ring, n, stream); }
    // After an mtp_forward of `next` at MTP position `start` and its wait: mtp_routes to
    // `observer`, as Model::mtp_forward reports the MTP layer (forward_routes.cpp).
    void report_mtp_routes(RouteObserver& observer, std::span<const std::int32_t> next, std::int64_t start) const;
    // After a dspark_block of `ids` at `start` and its wait: dspark_routes to `observer`, as
    // Model::dspark_block reports the stages (layers num_layers + s, one call).
    void report_dspark_routes(RouteObserver& observer, std::span<const std::int32_t> ids, std::int64_t start) const;
};

}  // namespace aff::gpu
