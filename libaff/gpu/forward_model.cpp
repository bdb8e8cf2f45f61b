// GpuModel's construction (forward_impl.hpp): where attention runs, the per-sequence state
// layout, the memory check against free VRAM and the cap, the upload; and the small queries
// (describe, memory_plan, new_state).
#include "libaff/core/error.hpp"
#include "libaff/core/units.hpp"
#include "libaff/gpu/forward_impl.hpp"
#include "libaff/placement/layer_split.hpp"
#include "libaff/placement/tier_plan.hpp"
#include "kernels/indexer.hpp"

#include <algorithm>
#include <sstream>

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
    // After the trunk's: the draft layers' (their rings in their own state's buffer).
    state_refs.assign(layers.size(), {});
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
    for (int l = first_layer; l < end_layer; ++l) {
        const std::size_t before = state_bytes;
        const AttentionRefs& a = layers[l].attn;
        LayerStateRefs& st = state_refs[l];
        st.ring = take(std::size_t(c.sliding_window) * c.head_dim);
        if (a.has_compressor) comp(a.compressor, st.compressor, false);
        if (a.has_indexer) comp(a.indexer, st.indexer, true);
        layer_bytes[l] += state_bytes - before;
    }
    // The MTP layer's ring lives in its own state buffer (new_mtp_state), not in the trunk's.
    // Set here, not in plan_mtp: that runs with the weights, before this sizes state_refs (the
    // MTP layer's first device run crashed writing into the still-empty vector).
    if (has_mtp) state_refs[c.num_layers].ring = mtp.ring;
    if (has_dspark)  // DSpark's stages' rings, in the DSpark state's buffer (plan_dspark)
        for (int s = 0; s < dspark.stages; ++s) state_refs[c.num_layers + s].ring = dspark.rings[std::size_t(s)];
}

fwd::ActivationShape GpuModel::Impl::activation_shape() const {
    fwd::ActivationShape shape{&c, hc_config(), rotated_matrices > 0, attention_on_gpu, scores_stride};
    // Tiered codebook-stored experts that the prefill GEMMs may read: their staging slots.
    // Off: no slot, only the pick's table (its counters).
    if (tiered && experts_codebook && !options.exact && options.gemm_min_tokens > 0) {
        shape.stage_slot_bytes = extent_stride;
        shape.stage_slots_max = options.prefill_staging == PrefillStaging::off ? 0 : options.prefill_stage_slots;
    }
    return shape;
}

void GpuModel::Impl::ensure_scratch(int tokens) {
    if (ensure(tokens, activation_shape())) graphs.clear();  // they point into the old activations
}

void GpuModel::Impl::prepare(const TensorReader* weights) {
    max_context = static_cast<int>(std::min<std::int64_t>(
        options.max_context > 0 ? options.max_context : c.max_position_embeddings, 1 << 20));
    if (max_context <= 0) max_context = 4096;
    weights_src = weights;
    // The draft layers' experts (GpuOptions::draft_placement): automatic puts them in host memory
    // when the trunk's are tiered (this part is planned again with `tiered` set then).
    mtp_in_host = options.draft_placement == DraftPlacement::ram ||
                  (options.draft_placement == DraftPlacement::automatic && tiered);
    decide_attention();
    plan_weights(weights);
    plan_state();
    plan.state_bytes = state_bytes;
    plan.scratch_bytes = layout(nullptr, kScratchTokens, activation_shape());
}

std::size_t GpuModel::Impl::available_bytes() const {
    use_device(device);
    const MemoryInfo mem = memory_info();
    const std::size_t free_after_reserve = mem.free_bytes > kRuntimeReserve ? mem.free_bytes - kRuntimeReserve : 0;
    std::size_t available = free_after_reserve;
    if (options.memory_cap_bytes > 0) available = std::min(available, options.memory_cap_bytes);
    return available;
}

void GpuModel::Impl::allocate() {
    use_device(device);
    // Before the tiers read MemAvailable for their host pool: the draft's pinned experts are taken.
    place_mtp_in_host(c);
    const MemoryInfo mem = memory_info();
    if (tiered) return allocate_tiers(mem);
    const std::size_t available = available_bytes();
    const std::size_t need = plan.total();
    if (need > available) {
        auto mib = [](std::size_t b) { return std::to_string((b + (1u << 20) - 1) >> 20); };
        std::string why = mib(available) + " MiB available (" + mib(mem.free_bytes) + " MiB free on GPU " +
                          std::to_string(device);
        if (options.memory_cap_bytes > 0) why += ", --gpu-mib " + std::to_string(options.memory_cap_bytes >> 20);
        const std::string what = first_layer == 0 && end_layer == c.num_layers
                                     ? std::string("the model needs ")
                                     : "layers " + std::to_string(first_layer) + "-" + std::to_string(end_layer - 1) +
                                           " need ";
        throw Error(ErrorKind::device, what + mib(need) + " MiB of GPU memory (dense " + mib(plan.dense_bytes) +
                                           ", routed experts " + mib(plan.expert_bytes) + ", activations " +
                                           mib(plan.scratch_bytes) + ", one sequence's state " +
                                           mib(plan.state_bytes) + "), " + why + "): " + mib(need - available) +
                                           " MiB missing");
    }
    upload(stream);
    materialised.clear();
    materialised.shrink_to_fit();
    ensure_scratch(kScratchTokens);
}

GpuModel::GpuModel(const Model& cpu, const TensorReader* weights, const GpuOptions& options) {
    const ModelConfig& c = cpu.config();
    if (!c.norm_topk_prob) throw_unsupported("GPU router: norm_topk_prob false is not implemented");
    if (c.hc_mult < 1 || c.hc_mult > kHcMaxStreams)
        throw_unsupported("GPU mHC: hc_mult " + std::to_string(c.hc_mult) + " outside 1..8");
    const std::vector<int> devices =
        options.devices.empty() ? std::vector<int>{options.device} : options.devices;
    std::vector<LayerRange> ranges{{0, c.num_layers, 0}};
    if (devices.size() > 1) {
        // The whole model planned once on the first device (nothing allocated) gives the bytes
        // the split weighs; each device offers its free memory (shared by the parts an ordinal
        // repeated gets), less the runtime's reserve, up to the cap.
        LayerSplitInput in;
        {
            Impl whole(cpu, options, devices[0], 0, c.num_layers);
            whole.prepare(weights);
            in.layer_bytes = whole.layer_bytes;
            in.first_bytes = whole.embed_bytes;
            in.last_bytes = whole.head_bytes;
            in.each_bytes = whole.common_bytes + whole.plan.scratch_bytes;
        }
        for (int d : devices) {
            use_device(d);
            const MemoryInfo mem = memory_info();
            const std::size_t parts = static_cast<std::size_t>(std::count(devices.begin(), devices.end(), d));
            std::size_t available = (mem.free_bytes > kRuntimeReserve ? mem.free_bytes - kRuntimeReserve : 0) / parts;
            if (options.memory_cap_bytes > 0) available = std::min(available, options.memory_cap_bytes);
            in.available.push_back(available);
            in.names.push_back("GPU " + std::to_string(d));
        }
        in.forced = options.layers_per_device;
        ranges = split_layers(in);
    } else if (!options.layers_per_device.empty() &&
               (options.layers_per_device.size() != 1 || options.layers_per_device[0] != c.num_layers)) {
        throw_usage("layer split: " + std::to_string(options.layers_per_device.size()) + " layer counts for one GPU");
    }
    if (devices.size() > 1 && options.tiers.slab_cap)
        throw_unsupported("--gpu-expert-mib: expert tiers across several GPUs are not implemented yet (use one GPU)");
    for (std::size_t i = 0; i < devices.size(); ++i) {
        auto part = std::make_unique<Impl>(cpu, options, devices[i], ranges[i].first, ranges[i].end);
        part->index = static_cast<int>(i);
        part->prepare(weights);
        // Expert tiers (expert_tiers.hpp) when asked for, or when the model and the headroom the
        // tiered plan would leave (--gpu-headroom-mib or the derived one) do not fit this one
        // GPU: planned again with the experts out of the arena. The same headroom on both sides
        // of the decision, so that a model which fits only by eating the headroom is tiered
        // rather than loaded whole and left to fail on its first graph capture.
        const std::size_t available = part->available_bytes();
        const std::size_t headroom = placement::plan_headroom(options.tiers.headroom, available);
        if (devices.size() == 1 && part->experts_codebook &&
            (options.tiers.slab_cap || part->plan.total() + headroom > available)) {
            auto why = [](std::size_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MiB"; };
            const std::string reason =
                options.tiers.slab_cap ? std::string("--gpu-expert-mib")
                                       : "the model needs " + why(part->plan.total()) + " and a " + why(headroom) +
                                             " headroom, the GPU offers " + why(available) +
                                             (options.memory_cap_bytes ? " (--gpu-mib)" : "");
            part = std::make_unique<Impl>(cpu, options, devices[i], ranges[i].first, ranges[i].end);
            part->index = static_cast<int>(i);
            part->tiered = true;
            part->prepare(weights);
            part->tier_reason = reason;
        }
        part->allocate();
        plan_.dense_bytes += part->plan.dense_bytes;
        plan_.expert_bytes += part->plan.expert_bytes;
        plan_.scratch_bytes += part->plan.scratch_bytes;
        plan_.state_bytes += part->plan.state_bytes;
        shards_.push_back(std::move(part));
    }
    use_device(devices[0]);
}

GpuModel::~GpuModel() = default;

const ModelConfig& GpuModel::config() const { return shards_.front()->c; }
const GpuMemoryPlan& GpuModel::memory_plan() const { return plan_; }

std::vector<int> GpuModel::devices() const {
    std::vector<int> out;
    for (const auto& p : shards_) out.push_back(p->device);
    return out;
}

std::vector<std::pair<int, int>> GpuModel::layer_split() const {
    std::vector<std::pair<int, int>> out;
    for (const auto& p : shards_) out.emplace_back(p->first_layer, p->end_layer);
    return out;
}

std::string GpuModel::describe() const {
    const Impl& m = *shards_.front();
    const Impl& last = *shards_.back();
    const GpuMemoryPlan& plan = plan_;
    const ModelConfig& c = m.c;
    auto type = [](DenseType t) { return t == DenseType::bf16 ? "bf16" : "f32"; };
    std::ostringstream o;
    int fp8_linears = 0, dense_linears = 0;
    for (const auto& p : shards_) {
        fp8_linears += p->fp8_linears;
        dense_linears += p->dense_linears;
    }
    o << "gpu: dense " << format_bytes(plan.dense_bytes) << " (embed " << type(m.embed.type) << ", head "
      << type(last.head.type) << ", linears: " << fp8_linears << " fp8, " << dense_linears << " dense), routed experts "
      << format_bytes(plan.expert_bytes) << " ("
      << (m.experts_codebook ? std::string(m.rotated_matrices == 0 ? "TQ2875"
                                           : m.rotated_matrices == 3 * m.expert_layers * c.n_routed_experts
                                               ? "TQ2875R"
                                               : "TQ2875/TQ2875R") +
                                   " codebook-stored through moe_gemv" +
                                   (m.rotated_matrices > 0 ? ", inputs rotated by the hadamard kernel" : "")
                             : std::string(type(m.expert_type)) +
                                   (m.dense_experts ? "" : ", decoded from the model's expert source") +
                                   (m.experts_why_dense.empty() ? "" : " (" + m.experts_why_dense + ")"))
      << "), activations "
      << format_bytes(plan.scratch_bytes);
    if (m.attention_on_gpu)
        o << "; attention on the GPU (state " << format_bytes(plan.state_bytes) << " a sequence, " << m.max_context
          << " tokens)";
    else
        o << "; attention on the CPU (" << m.attention_why_cpu << ")";
    if (m.tiers) o << "; " << tiers().describe();
    const bool dspark = m.cpu.has_dspark();
    if (dspark)
        o << "; DSpark stages "
          << (m.has_dspark ? "on the GPU" : "not on the GPU (" + m.dspark_why_not + ")");
    else
        o << "; MTP layer " << (m.has_mtp ? "on the GPU" : "not on the GPU (" + m.mtp_why_not + ")");
    if ((m.has_mtp || m.has_dspark) && m.experts_codebook)
        o << (m.mtp_experts_in_host(c) ? std::string(dspark ? ", their" : ", its") + " routed experts in RAM (" +
                                             format_bytes(m.mtp_host.size()) + " pinned host memory, read over the bus)"
                                       : std::string(dspark ? ", their" : ", its") + " routed experts in VRAM");
    if (shards_.size() > 1) {
        o << "; layers split across " << shards_.size() << " GPUs:";
        for (std::size_t i = 0; i < shards_.size(); ++i) {
            const Impl& p = *shards_[i];
            o << (i ? "," : "") << " layers " << p.first_layer << "-" << p.end_layer - 1 << " on GPU " << p.device
              << " (" << format_bytes(p.plan.total()) << ")";
        }
    }
    return o.str();
}

GpuDecodeState GpuModel::new_state() const {
    const Impl& m = *shards_.front();
    GpuDecodeState st;
    if (m.attention_on_gpu) {
        for (const auto& p : shards_) {  // each part's state on its own device
            use_device(p->device);
            Buffer b(std::max<std::size_t>(p->state_bytes, kAlign));
            Stream s;
            s.fill(b.data(), 0, b.size());
            s.synchronize();
            if (p->index == 0) st.device = std::move(b);
            else st.next_devices.push_back(std::move(b));
        }
        use_device(m.device);
    } else {
        st.attention = m.cpu.new_state();
    }
    return st;
}

}  // namespace aff::gpu
