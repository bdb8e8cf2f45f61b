// GpuModel's construction (forward_impl.hpp): where attention runs, the per-sequence state and
// activation layouts, the memory check against free VRAM and the cap, the arena upload; and
// the small queries (describe, memory_plan, new_state).
#include "aff/core/error.hpp"
#include "aff/core/units.hpp"
#include "aff/gpu/forward_impl.hpp"
#include "kernels/attention.hpp"
#include "kernels/indexer.hpp"
#include "kernels/moe_gemm.hpp"

#include <algorithm>
#include <sstream>
#include <type_traits>

namespace aff::gpu {

using namespace fwd;

void GpuModel::Impl::decide_attention() {
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

void GpuModel::Impl::plan_state() {
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
void GpuModel::Impl::layout_attention_scratch(Take& take, std::size_t n) {
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

std::size_t GpuModel::Impl::layout_scratch(std::uint8_t* base, int tokens) {
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
    // hc_pre's rows, or hc_site's per-block partial sums (decode-sized calls).
    take(hc_scratch, std::max(n * (hc_mix_rows(int(hc)) + 1),
                              hc_site_takes(int(std::min<std::size_t>(n, kHcSiteMaxTokens)), hc_config())
                                  ? hc_site_scratch_floats(int(std::min<std::size_t>(n, kHcSiteMaxTokens)), hc_config())
                                  : std::size_t(0)));
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

std::size_t GpuModel::Impl::scratch_bytes(int tokens) {
    return layout_scratch(nullptr, tokens);
}

void GpuModel::Impl::ensure_scratch(int tokens) {
    if (tokens <= capacity) return;
    const int cap = std::max(tokens, kScratchTokens);
    graphs.clear();  // they point into the old activations
    scratch = Buffer(layout_scratch(nullptr, cap));
    layout_scratch(scratch.as<std::uint8_t>(), cap);
    capacity = cap;
}

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

}  // namespace aff::gpu
