// GpuModel's weights (forward_impl.hpp): where each tensor goes in the device arena and in
// which form (FP8 as the model file stores it, else exact BF16 or F32; routed experts
// codebook-stored or as dense stacks), planned before anything is allocated; the bytes are
// produced when the arena is filled (Upload).
#include "libaff/checkpoint/tensor_reader.hpp"
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "libaff/quant/matrix.hpp"
#include "kernels/hadamard.hpp"
#include "kernels/moe_gemv.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>

namespace aff::gpu {

using namespace fwd;

namespace {

bool exactly_bf16(const float* v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u;
        std::memcpy(&u, &v[i], 4);
        if (u & 0xffffu) return false;
    }
    return true;
}

}  // namespace

std::size_t GpuModel::Impl::reserve(std::size_t bytes, std::size_t& counter) {
    const std::size_t at = arena_bytes;
    arena_bytes += align_up(bytes);
    counter += align_up(bytes);
    return at;
}

std::size_t GpuModel::Impl::put_floats(const std::vector<float>& v, std::size_t& counter) {
    const std::size_t at = reserve(v.size() * 4, counter);
    uploads.push_back({at, v.size() * 4, [&v](std::uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * 4); }});
    return at;
}

DenseRef GpuModel::Impl::put_dense(const Matrix& m, std::size_t& counter) {
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

Linear GpuModel::Impl::put_linear(const Matrix& m, const std::string& name, const TensorReader* ck, int row_block) {
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

const Matrix& GpuModel::Impl::expert_matrix(int layer, int e, ExpertMatrix which) const {
    if (dense_experts) return dense_experts->at(layer, e, which);
    return materialised[(std::size_t(layer) * c.n_routed_experts + e) * 3 + static_cast<int>(which)];
}

void GpuModel::Impl::materialise_experts(const ExpertSource& src) {
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

bool GpuModel::Impl::codebook_experts_fit() {
    const int D = c.hidden_size, I = c.moe_intermediate_size;
    auto shape_ok = [](int n, int k) { return k % 1024 == 0 && k <= 4096 && n % 2 == 0; };
    if (!shape_ok(I, D) || !shape_ok(D, I)) {
        experts_why_dense = "moe_gemv needs k % 1024 == 0, k <= 4096";
        return false;
    }
    if (c.n_routed_experts > kMoeGemvMaxExperts) {
        experts_why_dense = "moe_gemv's expert table takes at most " + std::to_string(kMoeGemvMaxExperts) + " experts";
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

std::size_t GpuModel::Impl::put_codebook_experts(int layer) {
    const int E = c.n_routed_experts;
    const std::size_t at = reserve(extent_stride * E, plan.expert_bytes);
    uploads.push_back({at, extent_stride * E, [this, layer, E](std::uint8_t* dst) {
                           std::memset(dst, 0, extent_stride * E);  // the padding between matrices and extents
                           for (int e = 0; e < E; ++e) {
                               std::uint8_t* x = dst + std::size_t(e) * extent_stride;
                               for (const auto& [which, offset, bytes] :
                                    {std::tuple{ExpertMatrix::w1, extent.w1, w13_bytes},
                                     std::tuple{ExpertMatrix::w2, extent.w2, w2_bytes},
                                     std::tuple{ExpertMatrix::w3, extent.w3, w13_bytes}})
                                   std::memcpy(x + offset, codebook_src->codebook_matrix(layer, e, which).bytes, bytes);
                           }
                       }});
    return at;
}

void GpuModel::Impl::put_expert_table() {
    const int E = c.n_routed_experts;
    const std::size_t entries = std::size_t(c.num_layers) * E, bytes = entries * sizeof(const std::uint8_t*);
    expert_table = reserve(bytes, plan.expert_bytes);
    uploads.push_back({expert_table, bytes, [this, E, entries, bytes](std::uint8_t* dst) {
                           table_host.assign(entries, nullptr);
                           for (int l = first_layer; l < end_layer; ++l)
                               for (int e = 0; e < E; ++e)
                                   table_host[std::size_t(l) * E + e] =
                                       arena.as<std::uint8_t>() + layers[l].extents + std::size_t(e) * extent_stride;
                           std::memcpy(dst, table_host.data(), bytes);
                       }});
}

void GpuModel::Impl::put_rotation_flags(int l, LayerRefs& r) {
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

DenseRef GpuModel::Impl::put_expert_stack(int layer, ExpertMatrix which, DenseType type) {
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

CompressorRefs GpuModel::Impl::put_compressor(const CompressorWeights& w, const std::string& p, const TensorReader* ck) {
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

AttentionRefs GpuModel::Impl::put_attention(const AttentionWeights& w, const std::string& p, const TensorReader* ck) {
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

void GpuModel::Impl::plan_weights(const TensorReader* ck) {
    const ModelWeights& w = cpu.weights();
    // The embedding on the first part only, the head and its norms on the last only.
    if (first_layer == 0) embed = put_dense(w.embed, plan.dense_bytes);
    embed_bytes = arena_bytes;
    if (end_layer == c.num_layers) {
        head = put_dense(w.head, plan.dense_bytes);
        norm = put_vec(w.norm);
        hc_head_fn = put_vec(w.hc_head.fn.w);
        hc_head_base = put_vec(w.hc_head.base);
        hc_head_scale = put_vec(w.hc_head.scale);
    }
    head_bytes = arena_bytes - embed_bytes;
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
        extent = extent_layout(w13_bytes, w2_bytes);
        extent_stride = align_up(extent.bytes);
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
    if (experts_codebook) put_expert_table();  // every part holds a whole table
    common_bytes = arena_bytes - embed_bytes - head_bytes;
    layers.assign(c.num_layers, {});
    layer_dense_bytes.assign(c.num_layers, 0);
    layer_bytes.assign(c.num_layers, 0);
    for (int l = first_layer; l < end_layer; ++l) {
        const std::size_t dense_before = plan.dense_bytes, arena_before = arena_bytes;
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
            r.extents = put_codebook_experts(l);
            r.expert_row = expert_table + std::size_t(l) * c.n_routed_experts * sizeof(const std::uint8_t*);
            put_rotation_flags(l, r);
        } else {
            r.experts_w1 = put_expert_stack(l, ExpertMatrix::w1, expert_type);
            r.experts_w2 = put_expert_stack(l, ExpertMatrix::w2, expert_type);
            r.experts_w3 = put_expert_stack(l, ExpertMatrix::w3, expert_type);
        }
        layer_dense_bytes[l] = plan.dense_bytes - dense_before;
        layer_bytes[l] = arena_bytes - arena_before;
        layers[l] = r;
    }
}

}  // namespace aff::gpu
