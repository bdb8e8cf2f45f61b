// The routed experts of a part (expert_store.hpp): the storage decision, the extents and the
// expert table, the dense stacks.
#include "libaff/gpu/expert_store.hpp"

#include "libaff/core/error.hpp"
#include "libaff/quant/matrix.hpp"
#include "kernels/hadamard.hpp"
#include "kernels/moe_gemv.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <tuple>

namespace aff::gpu::fwd {

ExtentLayout extent_layout(std::size_t w13_bytes, std::size_t w2_bytes) {
    auto up64 = [](std::size_t v) { return (v + 63) / 64 * 64; };
    ExtentLayout x;
    x.w2 = up64(x.w1 + w13_bytes);
    x.w3 = up64(x.w2 + w2_bytes);
    x.bytes = x.w3 + w13_bytes;
    return x;
}

const Matrix& ExpertStore::expert_matrix(const ModelConfig& c, int layer, int e, ExpertMatrix which) const {
    if (dense_experts) return dense_experts->at(layer, e, which);
    return materialised[(std::size_t(layer) * c.n_routed_experts + e) * 3 + static_cast<int>(which)];
}

void ExpertStore::materialise(const ModelConfig& c, const ExpertSource& src) {
    const int D = c.hidden_size, I = c.moe_intermediate_size, E = c.n_routed_experts;
    const double work = double(expert_layers) * E * 3 * double(D) * I * std::max(D, I);
    if (work > 4e10)
        throw_unsupported("the GPU forward keeps routed experts at 2.875 bits only when every one is stored as "
                          "TQ2875/TQ2875R at a shape moe_gemv takes (here: " +
                          (experts_why_dense.empty() ? std::string("not codebook-stored") : experts_why_dense) +
                          "); others are decoded at load, for small models only: quantise the model with "
                          "aff-quantize, or run it on the CPU with --gpus 0");
    materialised.resize(std::size_t(expert_layers) * E * 3);
    std::vector<float> unit, y;
    for (int l = 0; l < expert_layers; ++l)
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

bool ExpertStore::codebook_fits(const ModelConfig& c) {
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
    expert_rotated.assign(std::size_t(expert_layers) * c.n_routed_experts * 3, 0);
    rotated_matrices = 0;
    for (int l = 0; l < expert_layers; ++l)
        for (int e = 0; e < c.n_routed_experts; ++e)
            for (ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w2, ExpertMatrix::w3}) {
                const CodebookExperts::Stored st = codebook_src->codebook_matrix(l, e, which);
                if (!st.bytes && l >= c.num_layers) {  // a draft layer's: the trunk goes on without the draft
                    mtp_experts_why_not = "its routed experts are not codebook-stored like the trunk's";
                    expert_layers = c.num_layers;
                    expert_rotated.resize(std::size_t(expert_layers) * c.n_routed_experts * 3);
                    rotated_matrices = int(std::count(expert_rotated.begin(), expert_rotated.end(), std::uint8_t(1)));
                    return true;
                }
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

void ExpertStore::plan_store(const ModelConfig& c, const ExpertSource& src, WeightArena& w, int first, int end,
                             int draft_layers) {
    expert_layers = c.num_layers + draft_layers;
    dense_experts = dynamic_cast<const DenseExpertSource*>(&src);
    codebook_src = dynamic_cast<const CodebookExperts*>(&src);
    experts_codebook = codebook_src && codebook_fits(c);
    if (experts_codebook) {
        const std::span<const std::uint16_t> cb = codebook_src->codebook().fp16_values();
        codebook_dev = w.reserve(cb.size() * 2, w.plan.dense_bytes);
        w.uploads.push_back({codebook_dev, cb.size() * 2, [cb](std::uint8_t* dst) {
                                 std::memcpy(dst, cb.data(), cb.size() * 2);
                             }});
        w13_bytes = quant::matrix_bytes(c.moe_intermediate_size, c.hidden_size);
        w2_bytes = quant::matrix_bytes(c.hidden_size, c.moe_intermediate_size);
        extent = extent_layout(w13_bytes, w2_bytes);
        extent_stride = align_up(extent.bytes);
    } else if (!dense_experts) {
        materialise(c, src);
    }
    // One storage type for every expert stack: BF16 when all are exact BF16 (FP4 and BF16
    // checkpoints), else F32.
    expert_type = DenseType::bf16;
    for (int l = 0; l < expert_layers && expert_type == DenseType::bf16 && !experts_codebook; ++l)
        for (int e = 0; e < c.n_routed_experts && expert_type == DenseType::bf16; ++e)
            for (ExpertMatrix which : {ExpertMatrix::w1, ExpertMatrix::w2, ExpertMatrix::w3}) {
                const Matrix& m = expert_matrix(c, l, e, which);
                if (!exactly_bf16(m.w.data(), m.w.size())) {
                    expert_type = DenseType::f32;
                    break;
                }
            }
    if (mtp_in_host && expert_layers > c.num_layers && !experts_codebook)
        throw_unsupported("--draft-placement ram: the routed experts are not codebook-stored" +
                          (experts_why_dense.empty() ? std::string() : " (" + experts_why_dense + ")") +
                          ", so the draft's have no extents to keep in host memory; use --draft-placement vram");
    if (experts_codebook) put_table(c, w, first, end);  // every part holds a whole table
}

void ExpertStore::put_table(const ModelConfig& c, WeightArena& w, int first, int end) {
    const int E = c.n_routed_experts;
    const std::size_t entries = std::size_t(expert_layers) * E, bytes = entries * sizeof(const std::uint8_t*);
    layer_extents.assign(expert_layers, 0);
    expert_table = w.reserve(bytes, w.plan.expert_bytes);
    // The entries are the extents' addresses: known once the arena exists, when this runs.
    w.uploads.push_back({expert_table, bytes, [this, &w, &c, E, entries, bytes, first, end](std::uint8_t* dst) {
                             table_host.assign(entries, nullptr);
                             auto put = [&](int l) {
                                 for (int e = 0; e < E; ++e)
                                     table_host[std::size_t(l) * E + e] =
                                         tiers && l < c.num_layers ? tiers->address(l, e)
                                         : l >= c.num_layers && mtp_experts_in_host(c)
                                             ? static_cast<std::uint8_t*>(mtp_host.device_data()) +
                                                   (std::size_t(l - c.num_layers) * E + e) * extent_stride
                                             : w.arena.as<std::uint8_t>() + layer_extents[l] + std::size_t(e) * extent_stride;
                             };
                             for (int l = first; l < end; ++l) put(l);
                             for (int l = c.num_layers; l < expert_layers; ++l) put(l);  // the draft layers'
                             std::memcpy(dst, table_host.data(), bytes);
                         }});
}

void ExpertStore::plan_layer(const ModelConfig& c, WeightArena& w, int l, LayerRefs& r) {
    if (!experts_codebook) {
        r.experts_w1 = put_stack(c, w, l, ExpertMatrix::w1);
        r.experts_w2 = put_stack(c, w, l, ExpertMatrix::w2);
        r.experts_w3 = put_stack(c, w, l, ExpertMatrix::w3);
        return;
    }
    const int E = c.n_routed_experts;
    // The draft layers' experts stay in the arena, tiered or not, unless they go to host memory
    // (place_mtp_in_host): their rows are never moved by the mover.
    if ((!tiered && l < c.num_layers) || (l >= c.num_layers && !mtp_experts_in_host(c))) {
        layer_extents[l] = w.reserve(extent_stride * E, w.plan.expert_bytes);
        w.uploads.push_back({layer_extents[l], extent_stride * E, [this, l, E](std::uint8_t* dst) {
                                 std::memset(dst, 0, extent_stride * E);  // the padding between matrices and extents
                                 for (int e = 0; e < E; ++e) fill_extent(l, e, dst + std::size_t(e) * extent_stride);
                             }});
    }
    r.expert_row = expert_table + std::size_t(l) * E * sizeof(const std::uint8_t*);
    put_rotation_flags(c, w, l, r);
}

void ExpertStore::place_mtp_in_host(const ModelConfig& c) {
    if (!mtp_experts_in_host(c)) return;
    const int E = c.n_routed_experts, drafts = expert_layers - c.num_layers;
    mtp_host = PinnedBuffer(extent_stride * E * drafts);
    auto* dst = static_cast<std::uint8_t*>(mtp_host.data());
    std::memset(dst, 0, extent_stride * E * drafts);  // the padding, as in the arena
    for (int d = 0; d < drafts; ++d)
        for (int e = 0; e < E; ++e)
            fill_extent(c.num_layers + d, e, dst + (std::size_t(d) * E + e) * extent_stride);
}

void ExpertStore::fill_extent(int l, int e, std::uint8_t* dst) const {
    for (const auto& [which, offset, bytes] : {std::tuple{ExpertMatrix::w1, extent.w1, w13_bytes},
                                               std::tuple{ExpertMatrix::w2, extent.w2, w2_bytes},
                                               std::tuple{ExpertMatrix::w3, extent.w3, w13_bytes}})
        std::memcpy(dst + offset, codebook_src->codebook_matrix(l, e, which).bytes, bytes);
}

void ExpertStore::put_rotation_flags(const ModelConfig& c, WeightArena& w, int l, LayerRefs& r) {
    const int E = c.n_routed_experts;
    std::vector<std::uint8_t> f(std::size_t(3) * E);
    for (int e = 0; e < E; ++e)
        for (int m = 0; m < 3; ++m) f[std::size_t(m) * E + e] = expert_rotated[(std::size_t(l) * E + e) * 3 + m];
    auto any = [&](ExpertMatrix which) {
        const auto* p = &f[std::size_t(static_cast<int>(which)) * E];
        return std::any_of(p, p + E, [](std::uint8_t v) { return v != 0; });
    };
    r.rotated_w13 = any(ExpertMatrix::w1) || any(ExpertMatrix::w3);
    r.rotated_w2 = any(ExpertMatrix::w2);
    if (!r.rotated_w13 && !r.rotated_w2) return;
    r.rotated_flags = w.reserve(f.size(), w.plan.expert_bytes);
    w.uploads.push_back({r.rotated_flags, f.size(), [f](std::uint8_t* dst) { std::memcpy(dst, f.data(), f.size()); }});
}

DenseRef ExpertStore::put_stack(const ModelConfig& c, WeightArena& w, int layer, ExpertMatrix which) {
    const int E = c.n_routed_experts;
    const Matrix& m0 = expert_matrix(c, layer, 0, which);
    DenseRef r;
    r.rows = m0.rows;
    r.cols = m0.cols;
    r.type = expert_type;
    const DenseType type = expert_type;
    const std::size_t per = std::size_t(m0.rows) * m0.cols, elem = type == DenseType::bf16 ? 2 : 4;
    r.offset = w.reserve(per * E * elem, w.plan.expert_bytes);
    w.uploads.push_back({r.offset, per * E * elem, [this, &c, layer, which, E, per, elem, type](std::uint8_t* dst) {
                             for (int e = 0; e < E; ++e) {
                                 const Matrix& m = expert_matrix(c, layer, e, which);
                                 std::uint8_t* out = dst + std::size_t(e) * per * elem;
                                 if (type == DenseType::f32) std::memcpy(out, m.w.data(), per * 4);
                                 else store_bf16(m.w.data(), per, out);
                             }
                         }});
    return r;
}

void ExpertStore::set_address(const ModelConfig& c, const WeightArena& w, int l, int e, const void* address,
                              const Stream& stream) {
    const std::size_t entry = std::size_t(l) * c.n_routed_experts + e;
    table_host[entry] = static_cast<const std::uint8_t*>(address);
    // After every launch queued so far (they may read the old place), before any later one;
    // the host entry is copied before the call returns (pageable source).
    stream.copy(w.at<const std::uint8_t*>(expert_table) + entry, &table_host[entry], sizeof(const std::uint8_t*));
    stream.synchronize();
}

}  // namespace aff::gpu::fwd
