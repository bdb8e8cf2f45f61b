// Private to the GPU forward (libaff/gpu/forward_*.cpp): the weight references, the decode
// state layout and GpuModel::Impl, whose work is split by stage over the files named at each
// declaration block. Not a public header: nothing outside libaff/gpu/forward_*.cpp includes it.
#pragma once

#include "libaff/model/codebook_experts.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/forward.hpp"
#include "libaff/model/forward.hpp"
#include "kernels/compressor.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/hc.hpp"

#include <algorithm>
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

// The forward's own types live in fwd so they cannot collide with another file of aff::gpu.
namespace fwd {

inline constexpr std::size_t kAlign = 256;
inline constexpr int kScratchTokens = 64;
inline constexpr int kDecodeTokens = 4;  // calls of up to this many tokens give attention its split-key scratch
inline constexpr std::size_t kRuntimeReserve = 256u << 20;  // left free for the runtime and kernels' own needs
inline constexpr std::size_t kMaxGraphs = 16;  // captured decode steps kept (one per set of sequences)

inline std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// A weight in the arena: offset and form, resolved to a pointer once the arena exists.
struct DenseRef {
    std::size_t offset = 0;
    DenseType type = DenseType::f32;
    int rows = 0, cols = 0;
};

// A linear map y = W x: the checkpoint's FP8 bytes + E8M0 scales, or a dense BF16/F32 matrix.
struct Linear {
    bool fp8 = false;
    std::size_t w_offset = 0, scale_offset = 0;
    DenseType type = DenseType::f32;
    int rows = 0, cols = 0;
};

struct CompressorRefs {
    Linear wkv, wgate;
    std::size_t ape = 0, norm = 0;
    int ratio = 0, dim = 0;
    bool overlap = false;
};

struct AttentionRefs {
    bool on_gpu = false;
    std::size_t sink = 0, q_norm = 0, kv_norm = 0;
    Linear wq_a, wq_b, wkv, wo_a, wo_b;
    bool has_compressor = false, has_indexer = false;
    CompressorRefs compressor, indexer;
    Linear index_wq_b, index_weights;
};

// Where one layer's decode state lives inside a sequence's state buffer (GpuDecodeState).
struct CompressorStateRefs {
    std::size_t pending_kv = 0, pending_gate = 0, prev_kv = 0, prev_gate = 0, entries = 0;
    int capacity = 0;  // entries
};
struct LayerStateRefs {
    std::size_t ring = 0;
    CompressorStateRefs compressor, indexer;
};

// One sequence's tokens in a call: rows row .. row+n-1 of the activations, its state, and its
// start position: known on the host (prefill), or read by the kernels from start_at (device
// memory) when they run (decode, so a captured graph serves every position).
struct Seq {
    std::uint8_t* state = nullptr;
    std::int64_t start = 0;
    int n = 0, row = 0;
    const std::int32_t* start_at = nullptr;
};

struct LayerRefs {
    AttentionRefs attn;
    std::size_t attn_norm = 0, ffn_norm = 0;
    std::size_t hc_attn_fn = 0, hc_attn_base = 0, hc_attn_scale = 0;
    std::size_t hc_ffn_fn = 0, hc_ffn_base = 0, hc_ffn_scale = 0;
    Linear gate;                          // router [E, D]
    std::size_t bias = 0, tid2eid = 0;    // one of the two
    bool hash = false, has_shared = false;
    Linear shared_w1, shared_w2, shared_w3;
    DenseRef experts_w1, experts_w2, experts_w3;  // stacks [E][rows][cols]
    std::size_t extents = 0;     // codebook-stored: the layer's E expert extents, extent_stride apart
    std::size_t expert_row = 0;  // codebook-stored: the layer's row of the expert table (E addresses)
    bool rotated_w13 = false, rotated_w2 = false;  // some expert of the stacks is TQ2875R
    std::size_t rotated_flags = 0;                 // when so: uint8 [3][E], 1 = TQ2875R (ExpertMatrix order)
};

// Where the matrices of a codebook-stored expert lie in its extent: as the container lays an
// extent out (formats/container.md §7.5: w1, w2, w3 in that order, each at the next multiple
// of 64 from the extent's start), so an extent's bytes are the container's.
struct ExtentLayout {
    std::size_t w1 = 0, w2 = 0, w3 = 0, bytes = 0;
};
inline ExtentLayout extent_layout(std::size_t w13_bytes, std::size_t w2_bytes) {
    auto up64 = [](std::size_t v) { return (v + 63) / 64 * 64; };
    ExtentLayout x;
    x.w2 = up64(x.w1 + w13_bytes);
    x.w3 = up64(x.w2 + w2_bytes);
    x.bytes = x.w3 + w13_bytes;
    return x;
}

// Host-side copies waiting for the arena: bytes are produced when the arena is filled.
struct Upload {
    std::size_t offset = 0, bytes = 0;
    std::function<void(std::uint8_t*)> fill;
};


}  // namespace fwd

using fwd::AttentionRefs;
using fwd::CompressorRefs;
using fwd::CompressorStateRefs;
using fwd::DenseRef;
using fwd::ExtentLayout;
using fwd::LayerRefs;
using fwd::LayerStateRefs;
using fwd::Linear;
using fwd::Seq;
using fwd::Upload;

// Where each part lives: weights and their upload plan (forward_weights.cpp), the arena,
// activations, per-sequence state and describe() (forward_model.cpp), one linear map
// (forward_linear.cpp), the attention block (forward_attention.cpp), the MoE block
// (forward_moe.cpp), the layer loop with mHC, norms and head (forward_layers.cpp), and the
// calls: forward, decode with its captured graphs, the step profile (forward_decode.cpp).
//
// One Impl is one part of the model on one device: layers first_layer .. end_layer-1 (every
// layer on one GPU), the embedding when first_layer is 0, the hyper head, final norm and head
// when end_layer is the last. Layer-indexed members (layers, state_refs, layer_dense_bytes)
// keep the model's layer numbers; those of other parts stay empty.
struct GpuModel::Impl {
    const Model& cpu;
    const ModelConfig& c;
    GpuOptions options;
    int device = 0;
    int first_layer = 0, end_layer = 0;
    struct DeviceGuard {
        explicit DeviceGuard(int device) { use_device(device); }
    } device_guard;  // before the stream: it belongs to the chosen device
    GpuMemoryPlan plan;
    // What the layer split weighs (plan_weights, plan_state): the arena bytes of the embedding,
    // of the head with its norms, of what every part holds (codebook, RoPE table), and of
    // each layer's weights and one sequence's state of it.
    std::size_t embed_bytes = 0, head_bytes = 0, common_bytes = 0;
    std::vector<std::size_t> layer_bytes;
    std::vector<Upload> uploads;
    std::size_t arena_bytes = 0;
    Buffer arena;
    Stream stream;
    Event done;  // recorded when this part's work of a call is queued, for the next part to wait on

    DenseRef embed, head;
    std::size_t norm = 0, hc_head_fn = 0, hc_head_base = 0, hc_head_scale = 0;
    std::vector<LayerRefs> layers;
    std::vector<std::size_t> layer_dense_bytes;  // every weight of a layer but its routed experts
    int fp8_linears = 0, dense_linears = 0;
    DenseType expert_type = DenseType::bf16;

    // Attention on the GPU: whether the kernels take this geometry (why not, if not), the RoPE
    // tables (host, for the rope kernel; device, for the compressor), the per-sequence state.
    bool attention_on_gpu = false;
    std::string attention_why_cpu;
    std::vector<float> inv_freq_main, inv_freq_compress;
    std::size_t inv_freq_compress_dev = 0;
    int max_context = 0;
    std::vector<LayerStateRefs> state_refs;
    std::size_t state_bytes = 0;
    float *cq = nullptr, *q = nullptr, *kv = nullptr, *o = nullptr, *z = nullptr, *ckv = nullptr, *cg = nullptr;
    float *ikv = nullptr, *ig = nullptr, *qi = nullptr, *wi = nullptr, *scores = nullptr;
    std::int32_t *selected = nullptr, *selected_count = nullptr, *positions = nullptr;
    float* attention_scratch = nullptr;  // the attention kernel's split-key scratch, decode (<= 4 tokens)
    int scores_stride = 1;

    // Activations, sized for `capacity` tokens.
    int capacity = 0;
    Buffer scratch;
    float *x = nullptr, *u = nullptr, *a = nullptr, *f = nullptr, *post = nullptr, *comb = nullptr, *hc_scratch = nullptr;
    float *logits_router = nullptr, *route_w = nullptr, *g1 = nullptr, *g3 = nullptr, *routed = nullptr;
    float *a_rot = nullptr, *g1_rot = nullptr;  // H·a and H·g1 rows, for TQ2875R experts
    float *s1 = nullptr, *s3 = nullptr, *shared = nullptr, *y = nullptr, *logits = nullptr;
    std::int32_t *tokens_dev = nullptr, *route_ids = nullptr;

    // Captured decode steps, one per set of sequences (their state buffers are baked into the
    // launches); dropped when the activations move (ensure_scratch).
    struct CachedGraph {
        std::vector<const void*> key;
        Graph graph;
        bool pending = false;  // what run() returned at capture (an expand left for the next part)
    };
    std::vector<CachedGraph> graphs;

    // Step profile (GpuModel::profile_decode): an event recorded at the start of each op class.
    struct Mark {
        const char* what;
        int layer;
        std::unique_ptr<Event> event;
    };
    bool profiling = false;
    int mark_layer = -1;
    std::vector<Mark> marks;
    void mark(const char* what) {
        if (!profiling) return;
        marks.push_back({what, mark_layer, std::make_unique<Event>()});
        marks.back().event->record(stream);
    }
    void* moe_groups = nullptr;  // moe_group's scratch (prefill GEMM path)

    // Prefill calls (one sequence) of at least gemm_min_tokens tokens take the prefill GEMMs
    // (fp8_gemm, bf16_gemm, moe_gemm) where the shape allows; decode steps (of any number of
    // sequences) and shorter calls stay on the GEMVs, which keep fp32 activations.
    bool prefill_call = false;  // set by run()
    bool use_gemm(int n) const {
        return !options.exact && prefill_call && options.gemm_min_tokens > 0 && n >= options.gemm_min_tokens;
    }

    Impl(const Model& m, const GpuOptions& o, int dev, int first, int end)
        : cpu(m), c(m.config()), options(o), device(dev), first_layer(first), end_layer(end), device_guard(dev) {}

    // Where attention runs, the weights' and state's plans (nothing allocated yet).
    void prepare(const TensorReader* weights);
    // Checks the plan against this device's free memory now (and the cap), then allocates
    // and uploads.
    void allocate();

    // The layers this part runs in a call (set_max_layers counts over the whole model).
    int run_end() const {
        const int count = options.forward.max_layers < 0 ? c.num_layers : std::min(options.forward.max_layers, c.num_layers);
        return std::min(count, end_layer);
    }
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

    std::size_t reserve(std::size_t bytes, std::size_t& counter);
    std::size_t put_floats(const std::vector<float>& v, std::size_t& counter);
    std::size_t put_vec(const std::vector<float>& v) { return put_floats(v, plan.dense_bytes); }

    DenseRef put_dense(const Matrix& m, std::size_t& counter);

    // FP8 stays FP8 when the model file (checkpoint or container) stores it so (E4M3 + E8M0
    // scales) and fp8_gemv takes the shape; `row_block` is the row granularity the caller
    // slices the matrix at.
    Linear put_linear(const Matrix& m, const std::string& name, const TensorReader* ck, int row_block = 0);

    // Routed experts as dense matrices. A DenseExpertSource (an unquantised checkpoint) hands
    // them over as they are; any other source (a quantised container) is read through its
    // public matvec, one unit vector a column: exactly the values the CPU reference multiplies
    // by (TQ2875R's input rotation included), for matrices small enough that this takes
    // moments. Larger ones must be codebook-stored (moe_gemv, codebook_experts_fit).
    const DenseExpertSource* dense_experts = nullptr;
    // Codebook-stored experts (TQ2875, TQ2875R), uploaded as stored and multiplied with
    // moe_gemv; expert_rotated[(layer · E + expert) · 3 + matrix] says which are TQ2875R.
    const CodebookExperts* codebook_src = nullptr;
    bool experts_codebook = false;
    std::vector<std::uint8_t> expert_rotated;
    int rotated_matrices = 0;
    std::string experts_why_dense;
    std::size_t codebook_dev = 0, w13_bytes = 0, w2_bytes = 0;
    // Each codebook-stored expert is one extent (extent: where its matrices lie in it), the
    // layer's E extents extent_stride apart in the arena at first; the expert table
    // (expert_table in the arena, [layer][E] addresses, every layer of the model, nullptr for
    // other parts' layers) says where each is now, and the kernels read it when they run.
    // table_host mirrors it (move_expert writes both).
    ExtentLayout extent;
    std::size_t extent_stride = 0, expert_table = 0;
    std::vector<const std::uint8_t*> table_host;
    std::size_t captures = 0;  // decode graphs captured (GpuModel::graphs_captured)
    std::vector<Matrix> materialised;  // [layer][expert][3], when the source is not dense

    const Matrix& expert_matrix(int layer, int e, ExpertMatrix which) const;

    void materialise_experts(const ExpertSource& src);

    // Whether every routed expert is codebook-stored in a form moe_gemv takes (k % 1024 == 0,
    // k <= 4096, n even): TQ2875, or TQ2875R whose input the hadamard kernel rotates first.
    bool codebook_experts_fit();

    // Layer l's E extents (put_codebook_experts), and the expert table pointing at them
    // (put_expert_table: its entries are the arena's addresses, written when the arena exists).
    std::size_t put_codebook_experts(int layer);
    void put_expert_table();

    // Layer l's TQ2875R flags ([3][E] bytes, ExpertMatrix order) when any of its experts is
    // rotated; which stacks need a rotated input.
    void put_rotation_flags(int l, LayerRefs& r);

    // One stack [E][rows][cols] of a routed-expert matrix, in `type`.
    DenseRef put_expert_stack(int layer, ExpertMatrix which, DenseType type);

    // Whether the attention kernels take this model's geometry (their headers state the limits).
    void decide_attention();

    CompressorRefs put_compressor(const CompressorWeights& w, const std::string& p, const TensorReader* ck);

    AttentionRefs put_attention(const AttentionWeights& w, const std::string& p, const TensorReader* ck);

    // The per-sequence state: ring [W, Dh] and each compressor's pending window, previous
    // window (CSA) and entries for max_context tokens.
    void plan_state();

    template <class Take>
    void layout_attention_scratch(Take& take, std::size_t n);

    void plan_weights(const TensorReader* ck);

    // Carves the activations of `tokens` tokens out of base (or only counts them when base is
    // null); returns the bytes used. One list, so the plan and the allocation cannot disagree.
    std::size_t layout_scratch(std::uint8_t* base, int tokens);

    std::size_t scratch_bytes(int tokens);

    void ensure_scratch(int tokens);

    template <class T>
    T* at(std::size_t offset) const {
        return reinterpret_cast<T*>(arena.as<std::uint8_t>() + offset);
    }

    // y rows (ldy apart) = W[row0 .. row0+rows) · x rows (ldx apart), batch rows.
    void apply(const Linear& l, const float* xin, int ldx, int batch, float* yout, int ldy, int row0 = 0,
               int rows = -1);
    // apply(l0, ...y0) and apply(l1, ...y1) over the same x: one fp8_gemv_multi launch a 4 rows
    // of x when both are FP8 GEMV calls of the same width (same results), else the two applies.
    void apply_pair(const Linear& l0, float* y0, int ldy0, const Linear& l1, float* y1, int ldy1, const float* xin,
                    int ldx, int batch);

    // y rows = W x rows for a dense BF16/F32 matrix: bf16_gemv (4 rows of x a launch) where it
    // takes the call, else dense_gemv.
    void dense_rows(const void* w, DenseType type, int rows, int cols, const float* xin, int ldx, int batch,
                    float* yout, int ldy);

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
    // ids on the device, decodes every distinct expert once for the tokens that chose it, and
    // runs w1 and w3 in one launch; up to kMoeGemvMaxBatch tokens a launch. A TQ2875R matrix
    // (stored as W Hᵀ) takes the rotated input H x: when any expert of the layer's w1/w3 stacks
    // is rotated, the layer's input is rotated once per token and w1 and w3 run as two launches
    // (their flags differ per expert), and when any of its w2 are, each pair's SwiGLU row; the
    // kernel picks the rotated input for a flagged expert (per-expert flags on the device).
    void routed_codebook(const LayerRefs& r, int n);

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

    // §3.9 (Model::moe): b [n, D] → f [n, D].
    void moe(const LayerRefs& r, int n);};

}  // namespace aff::gpu
