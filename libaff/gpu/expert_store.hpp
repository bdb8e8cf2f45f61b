// One part of GpuModel::Impl (forward_impl.hpp): the routed experts of a part. It decides how
// they are stored: codebook-stored (TQ2875/TQ2875R as the model file holds them, multiplied by
// moe_gemv and moe_gemm) where every expert is and the kernels take the shape, else dense
// BF16/F32 stacks (an unquantised checkpoint's matrices, or any other source read through its
// matvec at load, for small models). Codebook-stored experts are one extent each, laid out as
// the container lays one out, found by the kernels through the expert table [layer][expert] →
// address (in the arena; table_host mirrors it), which they read when they run: set_address
// moves an expert without recapturing a graph. Private to the GPU forward.
#pragma once

#include "libaff/checkpoint/config.hpp"
#include "libaff/gpu/device.hpp"
#include "libaff/gpu/expert_tiers.hpp"
#include "libaff/gpu/weight_arena.hpp"
#include "libaff/gpu/weight_refs.hpp"
#include "libaff/model/codebook_experts.hpp"
#include "libaff/model/weights.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aff::gpu::fwd {

// Where the matrices of a codebook-stored expert lie in its extent: as the container lays an
// extent out (formats/container.md §7.5: w1, w2, w3 in that order, each at the next multiple
// of 64 from the extent's start), so an extent's bytes are the container's.
struct ExtentLayout {
    std::size_t w1 = 0, w2 = 0, w3 = 0, bytes = 0;
};
ExtentLayout extent_layout(std::size_t w13_bytes, std::size_t w2_bytes);

struct ExpertStore {
    // How they are stored.
    const DenseExpertSource* dense_experts = nullptr;  // an unquantised checkpoint's, handed over as they are
    const CodebookExperts* codebook_src = nullptr;
    bool experts_codebook = false;
    std::string experts_why_dense;
    // expert_rotated[(layer · E + expert) · 3 + matrix]: TQ2875R (its input rotated first).
    std::vector<std::uint8_t> expert_rotated;
    int rotated_matrices = 0;
    DenseType expert_type = DenseType::bf16;  // of the dense stacks
    std::vector<Matrix> materialised;         // [layer][expert][3], when the source is not dense

    // Codebook-stored: the codebook, the matrices' sizes, the extents (layer l's E extents
    // extent_stride apart at layer_extents[l] at first) and the table.
    std::size_t codebook_dev = 0, w13_bytes = 0, w2_bytes = 0;
    ExtentLayout extent;
    std::size_t extent_stride = 0, expert_table = 0;
    std::vector<std::size_t> layer_extents;
    std::vector<const std::uint8_t*> table_host;  // [layer][E], filled with the arena

    // Tiered (expert_tiers.hpp): set before planning; the extents then get no place in the
    // arena, and `tiers` (made before the upload) says where each one is.
    bool tiered = false;
    std::string tier_reason;  // why (the report's `why`)
    std::unique_ptr<ExpertTiers> tiers;

    // Layers of experts the store covers: the main layers, and the draft layers (ExpertSource
    // layers num_layers ..: the MTP layer, or DSpark's stages) when plan_store was asked for
    // them and could store them as the others.
    int expert_layers = 0;
    std::string mtp_experts_why_not;  // asked for the draft layers and they could not come: why
    // The draft layers' codebook-stored experts in pinned, mapped host memory (GpuOptions::
    // draft_placement ram) instead of the arena: set before planning; place_mtp_in_host
    // allocates and fills mtp_host (draft layer by layer, E extents each) before the table's
    // upload points the layers' rows at it.
    bool mtp_in_host = false;
    PinnedBuffer mtp_host;

    // Decides the storage for `src`'s experts and plans what a part holds for all its layers
    // (the codebook and the expert table: layers first .. end-1, and the rows of
    // `draft_layers` draft layers after the main ones: 1 for MTP, the stages for DSpark). The
    // draft layers' experts are in the arena, tiered or not, unless mtp_in_host. Throws
    // unsupported for mtp_in_host when the experts are not codebook-stored (dense stacks have
    // no extents to point the kernels at).
    void plan_store(const ModelConfig& c, const ExpertSource& src, WeightArena& w, int first, int end,
                    int draft_layers = 0);
    // Plans layer l's experts into r: extents, table row and rotation flags, or dense stacks.
    void plan_layer(const ModelConfig& c, WeightArena& w, int l, LayerRefs& r);
    // Points expert e of layer l at `address` (table and mirror), queued on `stream` and waited for.
    void set_address(const ModelConfig& c, const WeightArena& w, int l, int e, const void* address,
                     const Stream& stream);

    // With mtp_in_host and draft layers' experts in the store: allocates mtp_host (on the
    // current device) and writes their extents there. Before the arena's upload.
    void place_mtp_in_host(const ModelConfig& c);
    // Whether the draft layers' experts are in mtp_host (false: in the arena, or no draft layer).
    bool mtp_experts_in_host(const ModelConfig& c) const {
        return mtp_in_host && experts_codebook && expert_layers > c.num_layers;
    }

    // Writes expert e of layer l's extent at dst (its matrices; the padding is left as it is).
    void fill_extent(int l, int e, std::uint8_t* dst) const;

    const Matrix& expert_matrix(const ModelConfig& c, int layer, int e, ExpertMatrix which) const;

private:
    void materialise(const ModelConfig& c, const ExpertSource& src);
    // Whether every routed expert is codebook-stored in a form moe_gemv takes (k % 1024 == 0,
    // k <= 4096, n even, at most kMoeGemvMaxExperts a layer): TQ2875, or TQ2875R whose input
    // the hadamard kernel rotates first.
    bool codebook_fits(const ModelConfig& c);
    void put_table(const ModelConfig& c, WeightArena& w, int first, int end);
    void put_rotation_flags(const ModelConfig& c, WeightArena& w, int l, LayerRefs& r);
    // One stack [E][rows][cols] of a routed-expert matrix, in expert_type.
    DenseRef put_stack(const ModelConfig& c, WeightArena& w, int layer, ExpertMatrix which);
};

}  // namespace aff::gpu::fwd
