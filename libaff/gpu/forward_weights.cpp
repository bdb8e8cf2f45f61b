// GpuModel's weights (forward_impl.hpp): where each tensor goes in the device arena and in
// which form (FP8 as the model file stores it, else exact BF16 or F32; the routed experts as
// the expert store decides, expert_store.hpp), planned before anything is allocated; the
// bytes are produced when the arena is filled (Upload).
#include "libaff/checkpoint/tensor_reader.hpp"
#include "libaff/core/error.hpp"
#include "libaff/gpu/forward_impl.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

namespace aff::gpu {

using namespace fwd;

DenseRef GpuModel::Impl::put_dense(const Matrix& m, std::size_t& counter) {
    DenseRef r;
    r.rows = m.rows;
    r.cols = m.cols;
    r.type = exactly_bf16(m.w.data(), m.w.size()) ? DenseType::bf16 : DenseType::f32;
    const std::size_t n = m.w.size(), bytes = n * (r.type == DenseType::bf16 ? 2 : 4);
    r.offset = reserve(bytes, counter);
    if (r.type == DenseType::bf16)
        uploads.push_back({r.offset, bytes, [&m, n](std::uint8_t* dst) { store_bf16(m.w.data(), n, dst); }});
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
    // The draft layers (the MTP layer, or DSpark's stages) come when the whole model is on this
    // one part with attention on the GPU.
    const bool whole = first_layer == 0 && end_layer == c.num_layers && attention_on_gpu;
    const bool want_mtp = cpu.has_mtp() && whole, want_dspark = cpu.has_dspark() && whole;
    const int stages = int(w.dspark.stages.size());
    auto why = [&](bool has) {
        return !has ? "the model has none"
               : !attention_on_gpu ? "attention runs on the CPU"
                                   : "the layers are split across GPUs";
    };
    if (!want_mtp) mtp_why_not = why(cpu.has_mtp());
    if (!want_dspark) dspark_why_not = why(cpu.has_dspark());
    plan_store(c, *w.experts, *this, first_layer, end_layer, want_mtp ? 1 : want_dspark ? stages : 0);
    inv_freq_main = rope_inv_freq(c.rope_main, c.rope_dim);
    inv_freq_compress = rope_inv_freq(c.rope_compress, c.rope_dim);
    if (attention_on_gpu) inv_freq_compress_dev = put_vec(inv_freq_compress);
    common_bytes = arena_bytes - embed_bytes - head_bytes;
    layers.assign(c.num_layers + std::max(1, stages), {});  // the draft layers' after the trunk's
    layer_dense_bytes.assign(c.num_layers, 0);
    layer_bytes.assign(c.num_layers, 0);
    for (int l = first_layer; l < end_layer; ++l) {
        const std::size_t dense_before = plan.dense_bytes, arena_before = arena_bytes;
        layers[l] = put_layer(w.layers[l], "layers." + std::to_string(l) + ".", l, c.hash_routed[l], ck);
        layer_dense_bytes[l] = plan.dense_bytes - dense_before;
        layer_bytes[l] = arena_bytes - arena_before;
    }
    if (want_mtp) plan_mtp(ck);
    if (want_dspark) plan_dspark(ck);
}

LayerRefs GpuModel::Impl::put_layer(const LayerWeights& lw, const std::string& prefix, int l, bool hash,
                                    const TensorReader* ck) {
    const std::string p = prefix + "ffn.";
    LayerRefs r;
    if (attention_on_gpu) r.attn = put_attention(lw.attn, prefix + "attn.", ck);
    r.attn_norm = put_vec(lw.attn_norm);
    r.ffn_norm = put_vec(lw.ffn_norm);
    r.hc_attn_fn = put_vec(lw.hc_attn.fn.w);
    r.hc_attn_base = put_vec(lw.hc_attn.base);
    r.hc_attn_scale = put_vec(lw.hc_attn.scale);
    r.hc_ffn_fn = put_vec(lw.hc_ffn.fn.w);
    r.hc_ffn_base = put_vec(lw.hc_ffn.base);
    r.hc_ffn_scale = put_vec(lw.hc_ffn.scale);
    r.gate = put_linear(lw.ffn.gate, p + "gate.weight", ck);
    r.hash = hash;
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
    plan_layer(c, *this, l, r);
    return r;
}

}  // namespace aff::gpu
