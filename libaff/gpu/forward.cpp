// The GPU model of forward.hpp: planning and uploading the weights into one device arena,
// and the layer loop. Section numbers refer to the model doc (model-deepseek-v4.md); each
// step names the CPU reference code (libaff/model/forward.cpp) it mirrors.
#include "aff/gpu/forward.hpp"

#include "aff/checkpoint/tensor_reader.hpp"
#include "aff/core/error.hpp"
#include "aff/core/units.hpp"
#include "aff/gpu/codebook_experts.hpp"
#include "aff/gpu/device.hpp"
#include "aff/gpu/forward_rope.hpp"
#include "aff/quant/matrix.hpp"
#include "kernels/attention.hpp"
#include "kernels/compressor.hpp"
#include "kernels/dense_gemv.hpp"
#include "kernels/embed.hpp"
#include "kernels/fp8_gemm.hpp"
#include "kernels/fp8_gemv.hpp"
#include "kernels/hadamard.hpp"
#include "kernels/hc.hpp"
#include "kernels/indexer.hpp"
#include "kernels/moe_gemm.hpp"
#include "kernels/moe_gemv.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/router_topk.hpp"
#include "kernels/swiglu.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <type_traits>

namespace aff::gpu {
namespace {

constexpr std::size_t kAlign = 256;
constexpr int kScratchTokens = 64;
constexpr int kDecodeTokens = 4;  // calls of up to this many tokens give attention its split-key scratch
constexpr std::size_t kRuntimeReserve = 256u << 20;  // left free for the runtime and kernels' own needs
constexpr std::size_t kMaxGraphs = 16;  // captured decode steps kept (one per set of sequences)

std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool exactly_bf16(const float* v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u;
        std::memcpy(&u, &v[i], 4);
        if (u & 0xffffu) return false;
    }
    return true;
}

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
    std::size_t codebook_w1 = 0, codebook_w2 = 0, codebook_w3 = 0;  // codebook-stored stacks [E][bytes]
    bool rotated_w13 = false, rotated_w2 = false;  // some expert of the stacks is TQ2875R
    std::size_t rotated_flags = 0;                 // when so: uint8 [3][E], 1 = TQ2875R (ExpertMatrix order)
};

// Host-side copies waiting for the arena: bytes are produced when the arena is filled.
struct Upload {
    std::size_t offset = 0, bytes = 0;
    std::function<void(std::uint8_t*)> fill;
};

}  // namespace

struct GpuModel::Impl {
    const Model& cpu;
    const ModelConfig& c;
    GpuOptions options;
    struct DeviceGuard {
        explicit DeviceGuard(int device) { use_device(device); }
    } device_guard;  // before the stream: it belongs to the chosen device
    GpuMemoryPlan plan;
    std::vector<Upload> uploads;
    std::size_t arena_bytes = 0;
    Buffer arena;
    Stream stream;

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
    bool use_gemm(int n) const { return prefill_call && options.gemm_min_tokens > 0 && n >= options.gemm_min_tokens; }

    Impl(const Model& m, const GpuOptions& o) : cpu(m), c(m.config()), options(o), device_guard(o.device) {}

    std::size_t reserve(std::size_t bytes, std::size_t& counter) {
        const std::size_t at = arena_bytes;
        arena_bytes += align_up(bytes);
        counter += align_up(bytes);
        return at;
    }
    std::size_t put_floats(const std::vector<float>& v, std::size_t& counter) {
        const std::size_t at = reserve(v.size() * 4, counter);
        uploads.push_back({at, v.size() * 4, [&v](std::uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * 4); }});
        return at;
    }
    std::size_t put_vec(const std::vector<float>& v) { return put_floats(v, plan.dense_bytes); }

    DenseRef put_dense(const Matrix& m, std::size_t& counter) {
        DenseRef r;
        r.rows = m.rows;
        r.cols = m.cols;
        r.type = exactly_bf16(m.w.data(), m.w.size()) ? DenseType::bf16 : DenseType::f32;
        const std::size_t n = m.w.size(), bytes = n * (r.type == DenseType::bf16 ? 2 : 4);
        r.offset = reserve(bytes, counter);
        if (r.type == DenseType::bf16)
            uploads.push_back({r.offset, bytes, [&m, n](std::uint8_t* dst) {
                                   for (std::size_t i = 0; i < n; ++i) {
                                       std::uint32_t u;
                                       std::memcpy(&u, &m.w[i], 4);
                                       const std::uint16_t h = static_cast<std::uint16_t>(u >> 16);
                                       std::memcpy(dst + 2 * i, &h, 2);
                                   }
                               }});
        else
            uploads.push_back({r.offset, bytes, [&m, n](std::uint8_t* dst) { std::memcpy(dst, m.w.data(), n * 4); }});
        return r;
    }

    // FP8 stays FP8 when the model file (checkpoint or container) stores it so (E4M3 + E8M0
    // scales) and fp8_gemv takes the shape; `row_block` is the row granularity the caller
    // slices the matrix at.
    Linear put_linear(const Matrix& m, const std::string& name, const TensorReader* ck, int row_block = 0) {
        Linear l;
        l.rows = m.rows;
        l.cols = m.cols;
        const std::optional<Fp8Stored> w =
            ck && m.cols % 128 == 0 && m.rows % 8 == 0 && (row_block == 0 || row_block % 128 == 0)
                ? ck->fp8_stored(name)
                : std::nullopt;
        if (w) {
            const std::size_t want_scales = std::size_t((m.rows + 127) / 128) * (m.cols / 128);
            if (w->code_bytes != std::size_t(m.rows) * m.cols || w->scale_bytes != want_scales)
                throw_format("tensor " + name + ": FP8 bytes or scale grid do not match [" + std::to_string(m.rows) +
                                 ", " + std::to_string(m.cols) + "]",
                             ck->file_of(name));
            const Fp8Stored st = *w;
            l.fp8 = true;
            l.w_offset = reserve(st.code_bytes, plan.dense_bytes);
            uploads.push_back({l.w_offset, st.code_bytes, [st](std::uint8_t* dst) { std::memcpy(dst, st.codes, st.code_bytes); }});
            l.scale_offset = reserve(st.scale_bytes, plan.dense_bytes);
            uploads.push_back(
                {l.scale_offset, st.scale_bytes, [st](std::uint8_t* dst) { std::memcpy(dst, st.scales, st.scale_bytes); }});
            ++fp8_linears;
            return l;
        }
        const DenseRef d = put_dense(m, plan.dense_bytes);
        l.w_offset = d.offset;
        l.type = d.type;
        ++dense_linears;
        return l;
    }

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
    std::vector<Matrix> materialised;  // [layer][expert][3], when the source is not dense

    const Matrix& expert_matrix(int layer, int e, ExpertMatrix which) const {
        if (dense_experts) return dense_experts->at(layer, e, which);
        return materialised[(std::size_t(layer) * c.n_routed_experts + e) * 3 + static_cast<int>(which)];
    }

    void materialise_experts(const ExpertSource& src) {
        const int D = c.hidden_size, I = c.moe_intermediate_size, E = c.n_routed_experts;
        const double work = double(c.num_layers) * E * 3 * double(D) * I * std::max(D, I);
        if (work > 4e10)
            throw_unsupported("the GPU forward keeps routed experts at 2.875 bits only when every one is stored as "
                              "TQ2875/TQ2875R at a shape moe_gemv takes (here: " +
                              (experts_why_dense.empty() ? std::string("not codebook-stored") : experts_why_dense) +
                              "); others are decoded at load, for small models only: quantise the model with "
                              "aff-quantize, or run it on the CPU with --gpus 0");
        materialised.resize(std::size_t(c.num_layers) * E * 3);
        std::vector<float> unit, y;
        for (int l = 0; l < c.num_layers; ++l)
            for (int e = 0; e < E; ++e)
                for (ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w2, ExpertMatrix::w3}) {
                    const int rows = which == ExpertMatrix::w2 ? D : I, cols = which == ExpertMatrix::w2 ? I : D;
                    Matrix& m = materialised[(std::size_t(l) * E + e) * 3 + static_cast<int>(which)];
                    m.rows = rows;
                    m.cols = cols;
                    m.w.assign(std::size_t(rows) * cols, 0.0f);
                    unit.assign(cols, 0.0f);
                    y.resize(rows);
                    for (int j = 0; j < cols; ++j) {
                        unit[j] = 1.0f;
                        src.matvec(l, e, which, unit.data(), y.data());
                        unit[j] = 0.0f;
                        for (int r = 0; r < rows; ++r) m.w[std::size_t(r) * cols + j] = y[r];
                    }
                }
    }

    // Whether every routed expert is codebook-stored in a form moe_gemv takes (k % 1024 == 0,
    // k <= 4096, n even): TQ2875, or TQ2875R whose input the hadamard kernel rotates first.
    bool codebook_experts_fit() {
        const int D = c.hidden_size, I = c.moe_intermediate_size;
        auto shape_ok = [](int n, int k) { return k % 1024 == 0 && k <= 4096 && n % 2 == 0; };
        if (!shape_ok(I, D) || !shape_ok(D, I)) {
            experts_why_dense = "moe_gemv needs k % 1024 == 0, k <= 4096";
            return false;
        }
        auto rotatable = [](int n) { return n >= 2 && n <= kHadamardMaxN && (n & (n - 1)) == 0; };
        expert_rotated.assign(std::size_t(c.num_layers) * c.n_routed_experts * 3, 0);
        rotated_matrices = 0;
        for (int l = 0; l < c.num_layers; ++l)
            for (int e = 0; e < c.n_routed_experts; ++e)
                for (ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w2, ExpertMatrix::w3}) {
                    const CodebookExperts::Stored st = codebook_src->codebook_matrix(l, e, which);
                    if (!st.bytes) {
                        experts_why_dense = "not every expert is codebook-stored";
                        return false;
                    }
                    if (st.rotated && !rotatable(which == ExpertMatrix::w2 ? I : D)) {
                        experts_why_dense = "TQ2875R input width outside the hadamard kernel's powers of two";
                        return false;
                    }
                    expert_rotated[(std::size_t(l) * c.n_routed_experts + e) * 3 + static_cast<int>(which)] = st.rotated;
                    rotated_matrices += st.rotated ? 1 : 0;
                }
        return true;
    }

    std::size_t put_codebook_stack(int layer, ExpertMatrix which, std::size_t bytes) {
        const int E = c.n_routed_experts;
        const std::size_t at = reserve(bytes * E, plan.expert_bytes);
        uploads.push_back({at, bytes * E, [this, layer, which, bytes, E](std::uint8_t* dst) {
                               for (int e = 0; e < E; ++e)
                                   std::memcpy(dst + std::size_t(e) * bytes,
                                               codebook_src->codebook_matrix(layer, e, which).bytes, bytes);
                           }});
        return at;
    }

    // Layer l's TQ2875R flags ([3][E] bytes, ExpertMatrix order) when any of its experts is
    // rotated; which stacks need a rotated input.
    void put_rotation_flags(int l, LayerRefs& r) {
        const int E = c.n_routed_experts;
        std::vector<std::uint8_t> f(std::size_t(3) * E);
        for (int e = 0; e < E; ++e)
            for (int w = 0; w < 3; ++w) f[std::size_t(w) * E + e] = expert_rotated[(std::size_t(l) * E + e) * 3 + w];
        auto any = [&](ExpertMatrix which) {
            const auto* p = &f[std::size_t(static_cast<int>(which)) * E];
            return std::any_of(p, p + E, [](std::uint8_t v) { return v != 0; });
        };
        r.rotated_w13 = any(ExpertMatrix::w1) || any(ExpertMatrix::w3);
        r.rotated_w2 = any(ExpertMatrix::w2);
        if (!r.rotated_w13 && !r.rotated_w2) return;
        r.rotated_flags = reserve(f.size(), plan.expert_bytes);
        uploads.push_back({r.rotated_flags, f.size(), [f](std::uint8_t* dst) { std::memcpy(dst, f.data(), f.size()); }});
    }

    // One stack [E][rows][cols] of a routed-expert matrix, in `type`.
    DenseRef put_expert_stack(int layer, ExpertMatrix which, DenseType type) {
        const int E = c.n_routed_experts;
        const Matrix& m0 = expert_matrix(layer, 0, which);
        DenseRef r;
        r.rows = m0.rows;
        r.cols = m0.cols;
        r.type = type;
        const std::size_t per = std::size_t(m0.rows) * m0.cols, elem = type == DenseType::bf16 ? 2 : 4;
        r.offset = reserve(per * E * elem, plan.expert_bytes);
        uploads.push_back({r.offset, per * E * elem, [this, layer, which, E, per, elem, type](std::uint8_t* dst) {
                               for (int e = 0; e < E; ++e) {
                                   const Matrix& m = expert_matrix(layer, e, which);
                                   std::uint8_t* out = dst + std::size_t(e) * per * elem;
                                   if (type == DenseType::f32) {
                                       std::memcpy(out, m.w.data(), per * 4);
                                       continue;
                                   }
                                   for (std::size_t i = 0; i < per; ++i) {
                                       std::uint32_t u;
                                       std::memcpy(&u, &m.w[i], 4);
                                       const std::uint16_t h = static_cast<std::uint16_t>(u >> 16);
                                       std::memcpy(out + 2 * i, &h, 2);
                                   }
                               }
                           }});
        return r;
    }

    // Whether the attention kernels take this model's geometry (their headers state the limits).
    void decide_attention() {
        auto no = [&](std::string why) { attention_why_cpu = std::move(why); };
        if (options.cpu_attention) return no("asked for");
        const int dh = c.head_dim;
        if (dh != 32 && dh != 64 && dh != 128 && dh != 256 && dh != 512)
            return no("head_dim " + std::to_string(dh) + " (the attention kernel takes 32, 64, 128, 256 or 512)");
        if (c.rope_dim / 2 > 64) return no("rope_dim over 128");
        if (c.index_heads * c.index_head_dim > 8192 || c.index_head_dim % 4 != 0 || c.index_head_dim > 512)
            return no("indexer geometry outside the indexer kernel's limits");
        if (c.index_topk > kIndexerMaxTopk) return no("index_topk over " + std::to_string(kIndexerMaxTopk));
        attention_on_gpu = true;
    }

    CompressorRefs put_compressor(const CompressorWeights& w, const std::string& p, const TensorReader* ck) {
        CompressorRefs r;
        r.wkv = put_linear(w.wkv, p + "wkv.weight", ck);
        r.wgate = put_linear(w.wgate, p + "wgate.weight", ck);
        r.ape = put_vec(w.ape.w);
        r.norm = put_vec(w.norm);
        r.ratio = w.ratio;
        r.dim = w.dim;
        r.overlap = w.overlap;
        return r;
    }

    AttentionRefs put_attention(const AttentionWeights& w, const std::string& p, const TensorReader* ck) {
        AttentionRefs r;
        r.on_gpu = true;
        r.sink = put_vec(w.sink);
        r.q_norm = put_vec(w.q_norm);
        r.kv_norm = put_vec(w.kv_norm);
        r.wq_a = put_linear(w.wq_a, p + "wq_a.weight", ck);
        r.wq_b = put_linear(w.wq_b, p + "wq_b.weight", ck);
        r.wkv = put_linear(w.wkv, p + "wkv.weight", ck);
        r.wo_a = put_linear(w.wo_a, p + "wo_a.weight", ck, c.o_lora_rank);
        r.wo_b = put_linear(w.wo_b, p + "wo_b.weight", ck);
        r.has_compressor = w.has_compressor;
        if (w.has_compressor) r.compressor = put_compressor(w.compressor, p + "compressor.", ck);
        r.has_indexer = w.has_indexer;
        if (w.has_indexer) {
            r.indexer = put_compressor(w.index_compressor, p + "indexer.compressor.", ck);
            r.index_wq_b = put_linear(w.index_wq_b, p + "indexer.wq_b.weight", ck);
            r.index_weights = put_linear(w.index_weights, p + "indexer.weights_proj.weight", ck);
        }
        return r;
    }

    // The per-sequence state: ring [W, Dh] and each compressor's pending window, previous
    // window (CSA) and entries for max_context tokens.
    void plan_state() {
        state_bytes = 0;
        state_refs.assign(c.num_layers, {});
        if (!attention_on_gpu) return;
        auto take = [&](std::size_t floats) {
            const std::size_t at = state_bytes;
            state_bytes += align_up(floats * 4);
            return at;
        };
        auto comp = [&](const CompressorRefs& w, CompressorStateRefs& st, bool indexer) {
            const std::size_t width = std::size_t(w.overlap ? 2 : 1) * w.dim;
            st.pending_kv = take(std::size_t(w.ratio) * width);
            st.pending_gate = take(std::size_t(w.ratio) * width);
            st.prev_kv = take(std::size_t(w.ratio) * w.dim);
            st.prev_gate = take(std::size_t(w.ratio) * w.dim);
            st.capacity = max_context / w.ratio + 1;
            st.entries = take(std::size_t(st.capacity) * w.dim);
            if (indexer) scores_stride = std::max(scores_stride, st.capacity);
        };
        for (int l = 0; l < c.num_layers; ++l) {
            const AttentionRefs& a = layers[l].attn;
            LayerStateRefs& st = state_refs[l];
            st.ring = take(std::size_t(c.sliding_window) * c.head_dim);
            if (a.has_compressor) comp(a.compressor, st.compressor, false);
            if (a.has_indexer) comp(a.indexer, st.indexer, true);
        }
    }

    template <class Take>
    void layout_attention_scratch(Take& take, std::size_t n) {
        if (!attention_on_gpu) return;
        const std::size_t H = c.num_heads, Dh = c.head_dim, Hi = c.index_heads, Di = c.index_head_dim;
        take(cq, n * c.q_lora_rank);
        take(q, n * H * Dh);
        take(kv, n * Dh);
        take(o, n * H * Dh);
        take(z, n * c.o_groups * c.o_lora_rank);
        take(ckv, n * 2 * Dh);
        take(cg, n * 2 * Dh);
        take(ikv, n * 2 * Di);
        take(ig, n * 2 * Di);
        take(qi, n * Hi * Di);
        take(wi, n * Hi);
        take(scores, n * scores_stride);
        take(selected, n * std::max(1, c.index_topk));
        take(selected_count, n);
        take(positions, n);
        take(attention_scratch, (attention_scratch_bytes(kDecodeTokens, c.num_heads, c.head_dim) + 3) / 4);
    }

    void plan_weights(const TensorReader* ck) {
        const ModelWeights& w = cpu.weights();
        embed = put_dense(w.embed, plan.dense_bytes);
        head = put_dense(w.head, plan.dense_bytes);
        norm = put_vec(w.norm);
        hc_head_fn = put_vec(w.hc_head.fn.w);
        hc_head_base = put_vec(w.hc_head.base);
        hc_head_scale = put_vec(w.hc_head.scale);
        if (!w.experts) throw_internal("GPU forward: the model has no routed-expert source");
        dense_experts = dynamic_cast<const DenseExpertSource*>(w.experts.get());
        codebook_src = dynamic_cast<const CodebookExperts*>(w.experts.get());
        experts_codebook = codebook_src && codebook_experts_fit();
        if (experts_codebook) {
            const std::span<const std::uint16_t> cb = codebook_src->codebook().fp16_values();
            codebook_dev = reserve(cb.size() * 2, plan.dense_bytes);
            uploads.push_back({codebook_dev, cb.size() * 2, [cb](std::uint8_t* dst) {
                                   std::memcpy(dst, cb.data(), cb.size() * 2);
                               }});
            w13_bytes = quant::matrix_bytes(c.moe_intermediate_size, c.hidden_size);
            w2_bytes = quant::matrix_bytes(c.hidden_size, c.moe_intermediate_size);
        } else if (!dense_experts) {
            materialise_experts(*w.experts);
        }
        // One storage type for every expert stack: BF16 when all are exact BF16 (FP4 and BF16
        // checkpoints), else F32.
        expert_type = DenseType::bf16;
        for (int l = 0; l < c.num_layers && expert_type == DenseType::bf16 && !experts_codebook; ++l)
            for (int e = 0; e < c.n_routed_experts && expert_type == DenseType::bf16; ++e)
                for (ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w2, ExpertMatrix::w3}) {
                    const Matrix& m = expert_matrix(l, e, which);
                    if (!exactly_bf16(m.w.data(), m.w.size())) {
                        expert_type = DenseType::f32;
                        break;
                    }
                }
        inv_freq_main = rope_inv_freq(c.rope_main, c.rope_dim);
        inv_freq_compress = rope_inv_freq(c.rope_compress, c.rope_dim);
        if (attention_on_gpu) inv_freq_compress_dev = put_vec(inv_freq_compress);
        for (int l = 0; l < c.num_layers; ++l) {
            const std::size_t dense_before = plan.dense_bytes;
            const LayerWeights& lw = w.layers[l];
            const std::string p = "layers." + std::to_string(l) + ".ffn.";
            LayerRefs r;
            if (attention_on_gpu) r.attn = put_attention(lw.attn, "layers." + std::to_string(l) + ".attn.", ck);
            r.attn_norm = put_vec(lw.attn_norm);
            r.ffn_norm = put_vec(lw.ffn_norm);
            r.hc_attn_fn = put_vec(lw.hc_attn.fn.w);
            r.hc_attn_base = put_vec(lw.hc_attn.base);
            r.hc_attn_scale = put_vec(lw.hc_attn.scale);
            r.hc_ffn_fn = put_vec(lw.hc_ffn.fn.w);
            r.hc_ffn_base = put_vec(lw.hc_ffn.base);
            r.hc_ffn_scale = put_vec(lw.hc_ffn.scale);
            r.gate = put_linear(lw.ffn.gate, p + "gate.weight", ck);
            r.hash = c.hash_routed[l];
            if (r.hash) {
                const std::vector<std::int32_t>& ids = lw.ffn.tid2eid;
                r.tid2eid = reserve(ids.size() * 4, plan.dense_bytes);
                uploads.push_back({r.tid2eid, ids.size() * 4, [&ids](std::uint8_t* dst) {
                                       std::memcpy(dst, ids.data(), ids.size() * 4);
                                   }});
            } else {
                r.bias = put_vec(lw.ffn.bias);
            }
            r.has_shared = lw.ffn.has_shared;
            if (r.has_shared) {
                r.shared_w1 = put_linear(lw.ffn.shared_w1, p + "shared_experts.w1.weight", ck);
                r.shared_w2 = put_linear(lw.ffn.shared_w2, p + "shared_experts.w2.weight", ck);
                r.shared_w3 = put_linear(lw.ffn.shared_w3, p + "shared_experts.w3.weight", ck);
            }
            if (experts_codebook) {
                r.codebook_w1 = put_codebook_stack(l, ExpertMatrix::w1, w13_bytes);
                r.codebook_w2 = put_codebook_stack(l, ExpertMatrix::w2, w2_bytes);
                r.codebook_w3 = put_codebook_stack(l, ExpertMatrix::w3, w13_bytes);
                put_rotation_flags(l, r);
            } else {
                r.experts_w1 = put_expert_stack(l, ExpertMatrix::w1, expert_type);
                r.experts_w2 = put_expert_stack(l, ExpertMatrix::w2, expert_type);
                r.experts_w3 = put_expert_stack(l, ExpertMatrix::w3, expert_type);
            }
            layer_dense_bytes.push_back(plan.dense_bytes - dense_before);
            layers.push_back(r);
        }
    }

    // Carves the activations of `tokens` tokens out of base (or only counts them when base is
    // null); returns the bytes used. One list, so the plan and the allocation cannot disagree.
    std::size_t layout_scratch(std::uint8_t* base, int tokens) {
        std::size_t used = 0;
        auto take = [&](auto*& ptr, std::size_t count) {
            using T = std::remove_reference_t<decltype(*ptr)>;
            if (base) ptr = reinterpret_cast<T*>(base + used);
            used += align_up(count * sizeof(T));
        };
        const std::size_t n = tokens, D = c.hidden_size, hc = c.hc_mult, k = c.experts_per_token,
                          I = c.moe_intermediate_size, E = c.n_routed_experts, V = c.vocab_size;
        take(x, n * hc * D);
        take(u, n * D);
        take(a, n * D);
        take(f, n * D);
        take(post, n * hc);
        take(comb, n * hc * hc);
        take(hc_scratch, n * (hc_mix_rows(int(hc)) + 1));
        take(logits_router, n * E);
        take(route_w, n * k);
        take(g1, n * k * I);
        take(g3, n * k * I);
        take(routed, n * k * D);
        if (rotated_matrices > 0) {
            take(a_rot, n * D);
            take(g1_rot, n * k * I);
        }
        take(s1, n * I);
        take(s3, n * I);
        take(shared, n * D);
        take(y, n * D);
        take(logits, n * V);
        take(tokens_dev, n);
        take(route_ids, n * k);
        {
            std::uint8_t* groups = nullptr;
            take(groups, moe_group_bytes(int(n * k), int(E)));
            moe_groups = groups;
        }
        layout_attention_scratch(take, n);
        return used;
    }

    std::size_t scratch_bytes(int tokens) {
        return layout_scratch(nullptr, tokens);
    }

    void ensure_scratch(int tokens) {
        if (tokens <= capacity) return;
        const int cap = std::max(tokens, kScratchTokens);
        graphs.clear();  // they point into the old activations
        scratch = Buffer(layout_scratch(nullptr, cap));
        layout_scratch(scratch.as<std::uint8_t>(), cap);
        capacity = cap;
    }

    template <class T>
    T* at(std::size_t offset) const {
        return reinterpret_cast<T*>(arena.as<std::uint8_t>() + offset);
    }

    // y rows (ldy apart) = W[row0 .. row0+rows) · x rows (ldx apart), batch rows.
    void apply(const Linear& l, const float* xin, int ldx, int batch, float* yout, int ldy, int row0 = 0,
               int rows = -1) {
        if (rows < 0) rows = l.rows;
        void* s = stream.handle();
        if (!l.fp8) {
            const std::size_t elem = l.type == DenseType::bf16 ? 2 : 4;
            if (use_gemm(batch) && l.type == DenseType::bf16 && bf16_gemm_takes(rows, l.cols, xin, ldx, yout, ldy)) {
                bf16_gemm(reinterpret_cast<const std::uint16_t*>(at<std::uint8_t>(l.w_offset) + std::size_t(row0) * l.cols * 2),
                          rows, l.cols, xin, ldx, batch, yout, ldy, s);
                return;
            }
            dense_gemv(at<std::uint8_t>(l.w_offset) + std::size_t(row0) * l.cols * elem, l.type, rows, l.cols, xin, ldx,
                       batch, yout, ldy, s);
            return;
        }
        const std::uint8_t* w = at<std::uint8_t>(l.w_offset) + std::size_t(row0) * l.cols;
        const std::uint8_t* sc = at<std::uint8_t>(l.scale_offset) + std::size_t(row0 / 128) * (l.cols / 128);
        if (use_gemm(batch) && fp8_gemm_takes(rows, l.cols, xin, ldx, yout, ldy)) {
            fp8_gemm(w, sc, rows, l.cols, xin, ldx, batch, yout, ldy, s);
            return;
        }
        Fp8GemvLayout layout;
        layout.ldx = ldx;
        layout.ldy = ldy;
        for (int b = 0; b < batch; b += kFp8GemvMaxBatch)
            fp8_gemv_layout(w, sc, rows, l.cols, xin + std::size_t(b) * ldx, std::min(kFp8GemvMaxBatch, batch - b),
                            yout + std::size_t(b) * ldy, layout, kFp8GemvDefault, s);
    }

    HcConfig hc_config() const {
        HcConfig h;
        h.dim = c.hidden_size;
        h.sinkhorn_iters = c.hc_sinkhorn_iters;
        h.hc_eps = static_cast<float>(c.hc_eps);
        h.norm_eps = static_cast<float>(c.rms_norm_eps);
        h.streams = c.hc_mult;
        return h;
    }

    // One compressor step (§3.5, Model::compress): the two projections of all n rows, then
    // the kernel per sequence on its own state.
    void run_compressor(const CompressorRefs& w, const CompressorStateRefs& st, std::span<const Seq> seqs, int n,
                        float* kv_buf, float* gate_buf) {
        const int D = c.hidden_size, width = (w.overlap ? 2 : 1) * w.dim;
        apply(w.wkv, a, D, n, kv_buf, width);
        apply(w.wgate, a, D, n, gate_buf, width);
        for (const Seq& q : seqs) {
            CompressorArgs ca;
            ca.kv = kv_buf + std::size_t(q.row) * width;
            ca.gate = gate_buf + std::size_t(q.row) * width;
            ca.ape = at<float>(w.ape);
            ca.norm = at<float>(w.norm);
            ca.inv_freq = at<float>(inv_freq_compress_dev);
            ca.pending_kv = reinterpret_cast<float*>(q.state + st.pending_kv);
            ca.pending_gate = reinterpret_cast<float*>(q.state + st.pending_gate);
            ca.prev_kv = w.overlap ? reinterpret_cast<float*>(q.state + st.prev_kv) : nullptr;
            ca.prev_gate = w.overlap ? reinterpret_cast<float*>(q.state + st.prev_gate) : nullptr;
            ca.entries = reinterpret_cast<float*>(q.state + st.entries);
            ca.n = q.n;
            ca.ratio = w.ratio;
            ca.dim = w.dim;
            ca.rope_dim = c.rope_dim;
            ca.overlap = w.overlap;
            ca.eps = static_cast<float>(c.rms_norm_eps);
            ca.start = q.start;
            ca.start_at = q.start_at;
            compressor(ca, stream.handle());
        }
    }

    // Entries of a compressor a launch may see: those the chunk completes (start known), or
    // the state's capacity (start read on the device: the kernels keep to the visible ones).
    static int entry_bound(const Seq& q, int ratio, int capacity) {
        return q.start_at ? capacity : static_cast<int>(compressor_end_entry(q.start, q.n, ratio));
    }

    // §3.4-3.8 on the GPU (Model::attention step by step): a [n, D] → f [n, D]. Projections,
    // norms and RoPE run over all n rows at once (positions[] holds each row's position); the
    // compressors, the indexer's scores and top-k, attention and the ring per sequence.
    void attention_gpu(int l, std::span<const Seq> seqs, int n) {
        void* s = stream.handle();
        const AttentionRefs& r = layers[l].attn;
        const LayerStateRefs& sr = state_refs[l];
        const int D = c.hidden_size, H = c.num_heads, Dh = c.head_dim, Rq = c.q_lora_rank;
        const float eps = static_cast<float>(c.rms_norm_eps);
        const std::vector<float>& inv = c.attention[l] == AttentionKind::sliding ? inv_freq_main : inv_freq_compress;
        // Query path: low-rank q, q_norm, per-head unweighted norm, RoPE.
        mark("attention q/kv projections");
        apply(r.wq_a, a, D, n, cq, Rq);
        rms_norm(cq, at<float>(r.q_norm), cq, n, Rq, eps, s);
        apply(r.wq_b, cq, Rq, n, q, H * Dh);
        rms_norm(q, nullptr, q, n * H, Dh, eps, s);
        rope_with_inv_freq(q, positions, n, H, Dh, inv, false, s);
        // The latent that is both key and value.
        apply(r.wkv, a, D, n, kv, Dh);
        rms_norm(kv, at<float>(r.kv_norm), kv, n, Dh, eps, s);
        rope_with_inv_freq(kv, positions, n, 1, Dh, inv, false, s);

        mark("compressors and indexer");
        if (r.has_compressor) run_compressor(r.compressor, sr.compressor, seqs, n, ckv, cg);
        const int Hi = c.index_heads, Di = c.index_head_dim;
        if (r.has_indexer) {  // §3.7: score the indexer keys, keep the top index_topk
            run_compressor(r.indexer, sr.indexer, seqs, n, ikv, ig);
            apply(r.index_wq_b, cq, Rq, n, qi, Hi * Di);
            rope_with_inv_freq(qi, positions, n, Hi, Di, inv_freq_compress, false, s);
            apply(r.index_weights, a, D, n, wi, Hi);
            for (const Seq& sq : seqs) {
                const int ratio = r.indexer.ratio, count = entry_bound(sq, ratio, sr.indexer.capacity);
                const float* keys = reinterpret_cast<const float*>(sq.state + sr.indexer.entries);
                float* sc = scores + std::size_t(sq.row) * scores_stride;
                indexer_scores(qi + std::size_t(sq.row) * Hi * Di, wi + std::size_t(sq.row) * Hi, keys, sc, sq.n, Hi,
                               Di, sq.start, ratio, count, scores_stride, s, sq.start_at);
                indexer_topk(sc, sq.n, scores_stride, sq.start, ratio, count, c.index_topk,
                             selected + std::size_t(sq.row) * c.index_topk, selected_count + sq.row, s, sq.start_at);
            }
        }
        mark("attention kernel, ring");
        const std::size_t scratch_per_token = attention_scratch_bytes(1, H, Dh) / 4;
        for (const Seq& sq : seqs) {
            AttentionArgs aa;
            if (r.has_compressor) {
                aa.entries = reinterpret_cast<const float*>(sq.state + sr.compressor.entries);
                aa.entry_count = entry_bound(sq, r.compressor.ratio, sr.compressor.capacity);
                aa.ratio = r.compressor.ratio;
            }
            if (r.has_indexer) {
                aa.selected = selected + std::size_t(sq.row) * c.index_topk;
                aa.selected_count = selected_count + sq.row;
                aa.selected_stride = c.index_topk;
            }
            aa.q = q + std::size_t(sq.row) * H * Dh;
            aa.kv = kv + std::size_t(sq.row) * Dh;
            aa.ring = reinterpret_cast<float*>(sq.state + sr.ring);
            aa.sink = at<float>(r.sink);
            aa.out = o + std::size_t(sq.row) * H * Dh;
            aa.n = sq.n;
            aa.heads = H;
            aa.head_dim = Dh;
            aa.window = c.sliding_window;
            aa.start = sq.start;
            aa.start_at = sq.start_at;
            // Sequences of a decode call (rows < kDecodeTokens) each have their own slice.
            if (sq.row + sq.n <= kDecodeTokens) aa.scratch = attention_scratch + std::size_t(sq.row) * scratch_per_token;
            attention(aa, s);
        }
        rope_with_inv_freq(o, positions, n, H, Dh, inv, true, s);  // de-rotate at the query position
        for (const Seq& sq : seqs)
            ring_store(reinterpret_cast<float*>(sq.state + sr.ring), kv + std::size_t(sq.row) * Dh, sq.n, Dh,
                       c.sliding_window, sq.start, s, sq.start_at);
        // Grouped low-rank output projection, then wo_b.
        mark("attention output projections");
        const int G = c.o_groups, Ro = c.o_lora_rank, group_in = H * Dh / G;
        if (r.wo_a.fp8 && Ro % 8 == 0 && !use_gemm(n)) {
            // All G groups in one launch: row group g reads its slice of o (fp8_gemv_layout).
            Fp8GemvLayout layout;
            layout.ldx = H * Dh;
            layout.ldy = G * Ro;
            layout.group_rows = Ro;
            layout.x_group_stride = group_in;
            for (int b = 0; b < n; b += kFp8GemvMaxBatch)
                fp8_gemv_layout(at<std::uint8_t>(r.wo_a.w_offset), at<std::uint8_t>(r.wo_a.scale_offset), G * Ro,
                                r.wo_a.cols, o + std::size_t(b) * H * Dh, std::min(kFp8GemvMaxBatch, n - b),
                                z + std::size_t(b) * G * Ro, layout, kFp8GemvDefault, stream.handle());
        } else {
            for (int g = 0; g < G; ++g)
                apply(r.wo_a, o + std::size_t(g) * group_in, H * Dh, n, z + std::size_t(g) * Ro, G * Ro, g * Ro, Ro);
        }
        apply(r.wo_b, z, G * Ro, n, f, D);
    }

    // Routed experts through moe_gemv_routed (codebook-stored): the kernel reads the chosen
    // ids on the device, decodes every distinct expert once for the tokens that chose it, and
    // runs w1 and w3 in one launch; up to kMoeGemvMaxBatch tokens a launch. A TQ2875R matrix
    // (stored as W Hᵀ) takes the rotated input H x: when any expert of the layer's w1/w3 stacks
    // is rotated, the layer's input is rotated once per token and w1 and w3 run as two launches
    // (their flags differ per expert), and when any of its w2 are, each pair's SwiGLU row; the
    // kernel picks the rotated input for a flagged expert (per-expert flags on the device).
    void routed_codebook(const LayerRefs& r, int n) {
        void* s = stream.handle();
        const int D = c.hidden_size, I = c.moe_intermediate_size, k = c.experts_per_token;
        const std::uint8_t* base = arena.as<std::uint8_t>();
        const std::uint16_t* cb = at<std::uint16_t>(codebook_dev);
        const int E = c.n_routed_experts, total = n * k;
        // Flags [matrix][expert], matrix as ExpertMatrix numbers it (w1, w2, w3).
        auto flags = [&](ExpertMatrix which) { return base + r.rotated_flags + std::size_t(static_cast<int>(which)) * E; };
        if (r.rotated_w13) hadamard_rotate(a, D, a_rot, D, D, n, s);
        for (int t0 = 0; t0 < n; t0 += kMoeGemvMaxBatch) {
            const std::size_t p0 = std::size_t(t0) * k;
            MoeGemvRouted up;
            up.ids = route_ids + p0;
            up.tokens = std::min(kMoeGemvMaxBatch, n - t0);
            up.top_k = k;
            up.x = a + std::size_t(t0) * D;
            up.x_token_stride = D;
            up.x_slot_stride = 0;
            if (!r.rotated_w13) {
                up.matrices = 2;
                up.stack[0] = base + r.codebook_w1;
                up.stack[1] = base + r.codebook_w3;
                up.y[0] = g1 + p0 * I;
                up.y[1] = g3 + p0 * I;
                moe_gemv_routed(up, I, D, cb, kMoeGemvDefault, s);
                continue;
            }
            up.x_rotated = a_rot + std::size_t(t0) * D;
            for (const ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w3}) {
                const bool w1 = which == ExpertMatrix::w1;
                up.stack[0] = base + (w1 ? r.codebook_w1 : r.codebook_w3);
                up.y[0] = (w1 ? g1 : g3) + p0 * I;
                up.rotated = flags(which);
                moe_gemv_routed(up, I, D, cb, kMoeGemvDefault, s);
            }
        }
        swiglu(g1, g3, (long long)total * I, static_cast<float>(c.swiglu_limit), g1, s);
        if (r.rotated_w2) hadamard_rotate(g1, I, g1_rot, I, I, total, s);  // read by the rotated experts' w2
        for (int t0 = 0; t0 < n; t0 += kMoeGemvMaxBatch) {
            const std::size_t p0 = std::size_t(t0) * k;
            MoeGemvRouted down;
            down.ids = route_ids + p0;
            down.tokens = std::min(kMoeGemvMaxBatch, n - t0);
            down.top_k = k;
            down.stack[0] = base + r.codebook_w2;
            down.y[0] = routed + p0 * D;
            down.x = g1 + p0 * I;
            down.x_token_stride = std::int64_t(k) * I;
            down.x_slot_stride = I;
            if (r.rotated_w2) {
                down.rotated = flags(ExpertMatrix::w2);
                down.x_rotated = g1_rot + p0 * I;
            }
            moe_gemv_routed(down, D, I, cb, kMoeGemvDefault, s);
        }
    }

    void run(std::span<const Seq> seqs, int n, int first, GpuDecodeState* cpu_state);

    // The checks of every call: token ids in the vocabulary, the state this model's, room left.
    void check_call(const GpuDecodeState& st, std::span<const std::int32_t> toks) const {
        const int n = static_cast<int>(toks.size()), V = c.vocab_size;
        for (std::int32_t t : toks)
            if (t < 0 || t >= V)
                throw_usage("token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) +
                            ")");
        if (attention_on_gpu ? st.device.size() < state_bytes : st.attention.layers.size() != std::size_t(c.num_layers))
            throw_internal("forward: decode state belongs to another model");
        if (attention_on_gpu && st.position + n > max_context)
            throw_usage("the sequence would reach " + std::to_string(st.position + n) + " tokens, over the GPU state's " +
                        std::to_string(max_context));
    }

    // Routed experts through moe_gemm (prefill): jobs grouped by expert on the device, no sync.
    void routed_codebook_gemm(const LayerRefs& r, int n) {
        void* s = stream.handle();
        const int D = c.hidden_size, I = c.moe_intermediate_size, k = c.experts_per_token, E = c.n_routed_experts;
        const int total = n * k;
        const std::uint8_t* base = arena.as<std::uint8_t>();
        const std::uint16_t* cb = at<std::uint16_t>(codebook_dev);
        moe_group(route_ids, total, E, moe_groups, s);
        moe_gemm(base + r.codebook_w1, w13_bytes, I, D, moe_groups, total, E, a, k, g1, cb, s);
        moe_gemm(base + r.codebook_w3, w13_bytes, I, D, moe_groups, total, E, a, k, g3, cb, s);
        swiglu(g1, g3, (long long)total * I, static_cast<float>(c.swiglu_limit), g1, s);
        moe_gemm(base + r.codebook_w2, w2_bytes, D, I, moe_groups, total, E, g1, 1, routed, cb, s);
    }

    // §3.9 (Model::moe): b [n, D] → f [n, D].
    void moe(const LayerRefs& r, int n) {
        void* s = stream.handle();
        const int D = c.hidden_size, I = c.moe_intermediate_size, k = c.experts_per_token;
        const float limit = static_cast<float>(c.swiglu_limit);
        float* shared_out = nullptr;
        mark("shared expert");
        if (r.has_shared) {
            apply(r.shared_w1, a, D, n, s1, I);
            apply(r.shared_w3, a, D, n, s3, I);
            swiglu(s1, s3, (long long)n * I, limit, s1, s);
            apply(r.shared_w2, s1, I, n, shared, D);
            shared_out = shared;
        }
        if (options.forward.no_routed_experts) {
            if (shared_out) stream.copy(f, shared_out, std::size_t(n) * D * 4);
            else stream.fill(f, 0, std::size_t(n) * D * 4);
            return;
        }
        mark("router");
        apply(r.gate, a, D, n, logits_router, c.n_routed_experts);
        RouterConfig rc;
        rc.experts = c.n_routed_experts;
        rc.top_k = k;
        rc.route_scale = static_cast<float>(c.routed_scaling_factor);
        router_topk(logits_router, n, rc, r.hash ? nullptr : at<float>(r.bias),
                    r.hash ? at<std::int32_t>(r.tid2eid) : nullptr, tokens_dev, route_ids, route_w, s);
        const int jobs = n * k;
        const std::uint8_t* base = arena.as<std::uint8_t>();
        mark("routed experts");
        // moe_gemm reads no rotated input yet: layers with TQ2875R experts stay on moe_gemv.
        if (experts_codebook && use_gemm(n) && !r.rotated_w13 && !r.rotated_w2 &&
            moe_gemm_takes(I, D, c.n_routed_experts) && moe_gemm_takes(D, I, c.n_routed_experts)) {
            routed_codebook_gemm(r, n);
            moe_combine(routed, route_w, n, k, D, shared_out, f, s);
            return;
        }
        if (experts_codebook) {
            routed_codebook(r, n);
            moe_combine(routed, route_w, n, k, D, shared_out, f, s);
            return;
        }
        dense_gemv_indexed(base + r.experts_w1.offset, r.experts_w1.type, I, D, route_ids, jobs, a, k, g1, s);
        dense_gemv_indexed(base + r.experts_w3.offset, r.experts_w3.type, I, D, route_ids, jobs, a, k, g3, s);
        swiglu(g1, g3, (long long)jobs * I, limit, g1, s);
        dense_gemv_indexed(base + r.experts_w2.offset, r.experts_w2.type, D, I, route_ids, jobs, g1, 1, routed, s);
        moe_combine(routed, route_w, n, k, D, shared_out, f, s);
    }
};

GpuModel::GpuModel(const Model& cpu, const TensorReader* weights, const GpuOptions& options)
    : impl_(std::make_unique<Impl>(cpu, options)) {
    Impl& m = *impl_;
    const ModelConfig& c = m.c;
    if (!c.norm_topk_prob) throw_unsupported("GPU router: norm_topk_prob false is not implemented");
    if (c.hc_mult < 1 || c.hc_mult > kHcMaxStreams)
        throw_unsupported("GPU mHC: hc_mult " + std::to_string(c.hc_mult) + " outside 1..8");
    m.max_context = static_cast<int>(std::min<std::int64_t>(
        options.max_context > 0 ? options.max_context : c.max_position_embeddings, 1 << 20));
    if (m.max_context <= 0) m.max_context = 4096;
    m.decide_attention();
    m.plan_weights(weights);
    m.plan_state();
    m.plan.state_bytes = m.state_bytes;
    m.plan.scratch_bytes = m.scratch_bytes(kScratchTokens);

    use_device(options.device);
    const MemoryInfo mem = memory_info();
    const std::size_t free_after_reserve = mem.free_bytes > kRuntimeReserve ? mem.free_bytes - kRuntimeReserve : 0;
    std::size_t available = free_after_reserve;
    if (options.memory_cap_bytes > 0) available = std::min(available, options.memory_cap_bytes);
    const std::size_t need = m.plan.total();
    if (need > available) {
        auto mib = [](std::size_t b) { return std::to_string((b + (1u << 20) - 1) >> 20); };
        std::string why = mib(available) + " MiB available (" + mib(mem.free_bytes) + " MiB free on GPU " +
                          std::to_string(options.device);
        if (options.memory_cap_bytes > 0) why += ", --gpu-mib " + std::to_string(options.memory_cap_bytes >> 20);
        throw Error(ErrorKind::device, "the model needs " + mib(need) + " MiB of GPU memory (dense " +
                                           mib(m.plan.dense_bytes) + ", routed experts " + mib(m.plan.expert_bytes) +
                                           ", activations " + mib(m.plan.scratch_bytes) + ", one sequence's state " +
                                           mib(m.plan.state_bytes) + "), " + why +
                                           "): " + mib(need - available) + " MiB missing");
    }
    m.arena = Buffer(std::max<std::size_t>(m.arena_bytes, kAlign));
    // Fill and upload tensor by tensor through one staging buffer.
    std::vector<std::uint8_t> staging;
    for (const Upload& up : m.uploads) {
        staging.resize(up.bytes);
        up.fill(staging.data());
        m.stream.copy(m.arena.as<std::uint8_t>() + up.offset, staging.data(), up.bytes);
        m.stream.synchronize();  // staging is reused
    }
    m.uploads.clear();
    m.materialised.clear();
    m.materialised.shrink_to_fit();
    m.ensure_scratch(kScratchTokens);
}

GpuModel::~GpuModel() = default;

const ModelConfig& GpuModel::config() const { return impl_->c; }
const GpuMemoryPlan& GpuModel::memory_plan() const { return impl_->plan; }

std::string GpuModel::describe() const {
    const Impl& m = *impl_;
    const ModelConfig& c = m.c;
    auto type = [](DenseType t) { return t == DenseType::bf16 ? "bf16" : "f32"; };
    std::ostringstream o;
    o << "gpu: dense " << format_bytes(m.plan.dense_bytes) << " (embed " << type(m.embed.type) << ", head "
      << type(m.head.type) << ", linears: " << m.fp8_linears << " fp8, " << m.dense_linears << " dense), routed experts "
      << format_bytes(m.plan.expert_bytes) << " ("
      << (m.experts_codebook ? std::string(m.rotated_matrices == 0 ? "TQ2875"
                                           : m.rotated_matrices == 3 * c.num_layers * c.n_routed_experts
                                               ? "TQ2875R"
                                               : "TQ2875/TQ2875R") +
                                   " codebook-stored through moe_gemv" +
                                   (m.rotated_matrices > 0 ? ", inputs rotated by the hadamard kernel" : "")
                             : std::string(type(m.expert_type)) +
                                   (m.dense_experts ? "" : ", decoded from the model's expert source") +
                                   (m.experts_why_dense.empty() ? "" : " (" + m.experts_why_dense + ")"))
      << "), activations "
      << format_bytes(m.plan.scratch_bytes);
    if (m.attention_on_gpu)
        o << "; attention on the GPU (state " << format_bytes(m.plan.state_bytes) << " a sequence, " << m.max_context
          << " tokens)";
    else
        o << "; attention on the CPU (" << m.attention_why_cpu << ")";
    return o.str();
}

GpuDecodeState GpuModel::new_state() const {
    const Impl& m = *impl_;
    GpuDecodeState st;
    if (m.attention_on_gpu) {
        st.device = Buffer(std::max<std::size_t>(m.state_bytes, kAlign));
        Stream s;
        s.fill(st.device.data(), 0, st.device.size());
        s.synchronize();
    } else {
        st.attention = m.cpu.new_state();
    }
    return st;
}

// The layers and the head for the n rows of `seqs` (tokens_dev and, with attention on the
// GPU, positions already hold them on the device); logits of rows first .. n-1 end in logits.
// Nothing here waits for the host while attention runs on the GPU: decode captures it.
void GpuModel::Impl::run(std::span<const Seq> seqs, int n, int first, GpuDecodeState* cpu_state) {
    void* s = stream.handle();
    const int hc = c.hc_mult, D = c.hidden_size, V = c.vocab_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const HcConfig hcc = hc_config();
    prefill_call = seqs.size() == 1;
    mark_layer = -1;
    mark("embedding");
    gpu::embed(at<void>(embed.offset), embed.type, D, tokens_dev, n, hc, x, s);  // §3.0

    std::vector<float> a_host, f_host;
    const int count = options.forward.max_layers < 0 ? c.num_layers : std::min(options.forward.max_layers, c.num_layers);
    for (int l = 0; l < count; ++l) {
        const LayerRefs& r = layers[l];
        mark_layer = l;
        // mHC around attention (Model::layer_forward): collapse, attn_norm.
        mark("mHC and norms");
        hc_pre(x, n, {at<float>(r.hc_attn_fn), at<float>(r.hc_attn_base), at<float>(r.hc_attn_scale)}, hcc,
               hc_scratch, post, comb, u, s);
        rms_norm(u, at<float>(r.attn_norm), a, n, D, eps, s);
        if (attention_on_gpu) {
            attention_gpu(l, seqs, n);
        } else {  // attention on the CPU (see forward.hpp): one sequence, its start on the host
            a_host.resize(std::size_t(n) * D);
            f_host.resize(std::size_t(n) * D);
            stream.copy(a_host.data(), a, a_host.size() * 4);
            stream.synchronize();
            cpu.attention_block(l, cpu_state->attention.layers[l], seqs[0].start, n, a_host.data(), f_host.data());
            stream.copy(f, f_host.data(), f_host.size() * 4);
        }
        mark("mHC and norms");
        hc_post(x, f, post, comb, n, D, s, hc);
        // mHC around the MoE.
        hc_pre(x, n, {at<float>(r.hc_ffn_fn), at<float>(r.hc_ffn_base), at<float>(r.hc_ffn_scale)}, hcc, hc_scratch,
               post, comb, u, s);
        rms_norm(u, at<float>(r.ffn_norm), a, n, D, eps, s);
        moe(r, n);
        mark("mHC and norms");
        hc_post(x, f, post, comb, n, D, s, hc);
    }
    mark_layer = -1;
    mark("hyper head, final norm, head");

    // §3.2 hyper head, §3.10 final norm and head (Model::hyper_head_logits).
    const int rows = n - first;
    hc_head(x + std::size_t(first) * hc * D, rows, {at<float>(hc_head_fn), at<float>(hc_head_base),
                                                    at<float>(hc_head_scale)},
            hcc, hc_scratch, y, s);
    rms_norm(y, at<float>(norm), y, rows, D, eps, s);
    dense_gemv(at<void>(head.offset), head.type, V, D, y, D, rows, logits, V, s);
    mark("end");
}

std::vector<float> GpuModel::forward(GpuDecodeState& st, std::span<const std::int32_t> toks, bool all_logits) {
    Impl& m = *impl_;
    const ModelConfig& c = m.c;
    const int n = static_cast<int>(toks.size()), V = c.vocab_size;
    if (n == 0) throw_usage("forward: no tokens");
    if (n == 1 && m.attention_on_gpu) {  // a decode step: the captured path
        GpuDecodeState* one[1] = {&st};
        return decode(one, toks);
    }
    m.check_call(st, toks);
    use_device(m.options.device);
    m.ensure_scratch(n);

    m.stream.copy(m.tokens_dev, toks.data(), std::size_t(n) * 4);
    std::vector<std::int32_t> pos(n);
    for (int t = 0; t < n; ++t) pos[t] = static_cast<std::int32_t>(st.position + t);
    if (m.attention_on_gpu) m.stream.copy(m.positions, pos.data(), std::size_t(n) * 4);
    const Seq seq{m.attention_on_gpu ? st.device.as<std::uint8_t>() : nullptr, st.position, n, 0, nullptr};
    const int first = all_logits ? 0 : n - 1;
    m.run(std::span<const Seq>(&seq, 1), n, first, &st);
    st.position += n;
    if (!m.attention_on_gpu) st.attention.position = st.position;

    std::vector<float> out(std::size_t(n - first) * V);
    m.stream.copy(out.data(), m.logits, out.size() * 4);
    m.stream.synchronize();
    return out;
}

void GpuModel::set_max_layers(int layers) {
    impl_->options.forward.max_layers = layers;
    impl_->graphs.clear();  // captured with the old layer count
}

GpuStepProfile GpuModel::profile_decode(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> toks) {
    Impl& m = *impl_;
    GpuStepProfile p;
    const bool graphs = m.options.graphs;
    m.options.graphs = false;
    m.profiling = true;
    m.marks.clear();
    try {
        p.logits = decode(states, toks);
    } catch (...) {
        m.options.graphs = graphs;
        m.profiling = false;
        throw;
    }
    m.options.graphs = graphs;
    m.profiling = false;
    const int layers = m.options.forward.max_layers < 0 ? m.c.num_layers : std::min(m.options.forward.max_layers, m.c.num_layers);
    p.layer_ms.assign(std::max(layers, 0), 0.0);
    for (std::size_t i = 0; i + 1 < m.marks.size(); ++i) {
        const Impl::Mark& k = m.marks[i];
        const double ms = m.marks[i + 1].event->ms_since(*k.event);
        auto it = std::find_if(p.classes.begin(), p.classes.end(), [&](const auto& e) { return e.first == k.what; });
        if (it == p.classes.end()) p.classes.emplace_back(k.what, ms);
        else it->second += ms;
        if (k.layer >= 0) p.layer_ms[k.layer] += ms;
        p.total_ms += ms;
    }
    m.marks.clear();
    return p;
}

std::size_t GpuModel::decode_read_bytes(int sequences) const {
    const Impl& m = *impl_;
    const ModelConfig& c = m.c;
    const int layers = m.options.forward.max_layers < 0 ? c.num_layers : std::min(m.options.forward.max_layers, c.num_layers);
    const std::size_t elem = [](DenseType t) { return t == DenseType::bf16 ? 2u : 4u; }(m.head.type);
    std::size_t bytes = std::size_t(c.vocab_size) * c.hidden_size * elem;  // the head
    bytes += std::size_t(sequences) * c.hidden_size * (m.embed.type == DenseType::bf16 ? 2 : 4);  // embedding rows
    const std::size_t routed =
        m.experts_codebook ? 2 * m.w13_bytes + m.w2_bytes
                           : 3 * std::size_t(c.hidden_size) * c.moe_intermediate_size * (m.expert_type == DenseType::bf16 ? 2 : 4);
    const std::size_t chosen = std::min<std::size_t>(std::size_t(sequences) * c.experts_per_token, c.n_routed_experts);
    for (int l = 0; l < layers; ++l) bytes += m.layer_dense_bytes[l] + chosen * routed;
    return bytes;
}

std::size_t GpuModel::decode_state_read_bytes(std::int64_t position) const {
    const Impl& m = *impl_;
    const ModelConfig& c = m.c;
    if (!m.attention_on_gpu) return 0;
    const int layers = m.options.forward.max_layers < 0 ? c.num_layers : std::min(m.options.forward.max_layers, c.num_layers);
    const std::size_t p = static_cast<std::size_t>(position) + 1;  // keys of the query at `position`
    std::size_t bytes = 0;
    for (int l = 0; l < layers; ++l) {
        const AttentionRefs& r = m.layers[l].attn;
        bytes += std::min<std::size_t>(p, c.sliding_window) * c.head_dim * 4;  // the window (ring)
        if (r.has_indexer) {  // every indexer key is scored, the top-k main entries attended
            const std::size_t entries = p / r.indexer.ratio;
            bytes += entries * c.index_head_dim * 4 + std::min<std::size_t>(entries, c.index_topk) * c.head_dim * 4;
        } else if (r.has_compressor) {
            bytes += p / r.compressor.ratio * c.head_dim * 4;
        }
    }
    return bytes;
}

std::vector<float> GpuModel::decode(std::span<GpuDecodeState* const> states, std::span<const std::int32_t> toks) {
    Impl& m = *impl_;
    const int B = static_cast<int>(states.size()), V = m.c.vocab_size;
    if (B < 1 || B > kDecodeBatchMax)
        throw_usage("decode: " + std::to_string(B) + " sequences (1.." + std::to_string(kDecodeBatchMax) + " a call)");
    if (toks.size() != states.size())
        throw_usage("decode: " + std::to_string(toks.size()) + " tokens for " + std::to_string(B) + " sequences");
    for (int i = 0; i < B; ++i) {
        for (int j = 0; j < i; ++j)
            if (states[j] == states[i]) throw_usage("decode: the same sequence twice in one call");
        m.check_call(*states[i], toks.subspan(i, 1));
    }
    if (!m.attention_on_gpu) {  // attention on the CPU: one sequence at a time
        std::vector<float> out;
        for (int i = 0; i < B; ++i) {
            const std::vector<float> one = forward(*states[i], toks.subspan(i, 1), false);
            out.insert(out.end(), one.begin(), one.end());
        }
        return out;
    }
    use_device(m.options.device);
    m.ensure_scratch(B);
    // Everything that changes between steps goes to the device before the launches: the
    // tokens, and each sequence's position (which the kernels read through Seq::start_at).
    std::vector<std::int32_t> pos(B);
    for (int i = 0; i < B; ++i) pos[i] = static_cast<std::int32_t>(states[i]->position);
    m.stream.copy(m.tokens_dev, toks.data(), std::size_t(B) * 4);
    m.stream.copy(m.positions, pos.data(), std::size_t(B) * 4);
    std::vector<Seq> seqs(B);
    for (int i = 0; i < B; ++i) seqs[i] = {states[i]->device.as<std::uint8_t>(), 0, 1, i, m.positions + i};
    auto record = [&] { m.run(seqs, B, 0, nullptr); };
    if (m.options.graphs) {
        std::vector<const void*> key(B);
        for (int i = 0; i < B; ++i) key[i] = states[i]->device.data();
        auto it = std::find_if(m.graphs.begin(), m.graphs.end(), [&](const auto& g) { return g.key == key; });
        if (it == m.graphs.end()) {
            if (m.graphs.size() >= kMaxGraphs) m.graphs.erase(m.graphs.begin());
            Graph g;
            g.capture(m.stream, record);
            m.graphs.push_back({key, std::move(g)});
            it = m.graphs.end() - 1;
        }
        it->graph.launch(m.stream);
    } else {
        record();
    }
    for (int i = 0; i < B; ++i) ++states[i]->position;

    std::vector<float> out(std::size_t(B) * V);
    m.stream.copy(out.data(), m.logits, out.size() * 4);
    m.stream.synchronize();
    return out;
}

}  // namespace aff::gpu
